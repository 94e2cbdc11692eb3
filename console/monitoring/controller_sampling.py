"""Sampling the RocketMQ 5 controller (``BROKER_CORE_CONTROLLER``): one pass asks the controller leader for
every broker-set's state (CONTROLLER_GET_SYNC_STATE_DATA, 1006) and records

- a :class:`ControllerSnapshot` of a set whose master, epochs, SyncStateSet or replica liveness changed since its
  previous snapshot (the first pass records every set);
- an :class:`Election` when a set's ``masterEpoch`` is higher than in its previous snapshot (once per epoch:
  an election already recorded by a console switch-over is not recorded twice).

The sets asked about: the broker names the name server lists, and every set with a snapshot in the last
:data:`KEEP_ASKING` (a set whose brokers all died leaves the name server but not the controller). A name server
that cannot be reached leaves only the second list; a controller that cannot be reached raises.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from broker_core.client import ClientError
from broker_core.protocol.controller import ReplicasInfo
from console import broker_client
from console.monitoring.models import ControllerSnapshot, Election

KEEP_ASKING = timedelta(days=7)


def _replicas(info: ReplicasInfo) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def row(r: Any) -> dict[str, Any]:
        return {"broker_id": r.broker_id, "address": r.broker_address, "alive": r.alive}
    return [row(r) for r in info.in_sync_replicas], [row(r) for r in info.not_in_sync_replicas]


def _same(snap: ControllerSnapshot, info: ReplicasInfo) -> bool:
    in_sync, not_in_sync = _replicas(info)
    return (snap.master_broker_id, snap.master_address or None, snap.master_epoch, snap.sync_state_set_epoch,
            snap.in_sync, snap.not_in_sync) == (info.master_broker_id, info.master_address, info.master_epoch,
                                                info.sync_state_set_epoch, in_sync, not_in_sync)


def broker_names(now: datetime) -> list[str]:
    names = set(ControllerSnapshot.objects.filter(timestamp__gte=now - KEEP_ASKING)
                .values_list("broker_name", flat=True))
    try:
        names |= set(broker_client.admin().cluster_info().get("brokerAddrTable", {}))
    except (ClientError, ConnectionError, TimeoutError):
        pass
    return sorted(names)


def record_election(broker_name: str, master_epoch: int, old_master: int | None, new_master: int | None,
                    new_address: str | None, now: datetime, source: str = Election.OBSERVED, by: str = "") -> bool:
    """Record one election (False when that set's epoch is recorded already)."""
    try:
        with transaction.atomic():
            Election.objects.create(detected_at=now, broker_name=broker_name, master_epoch=master_epoch,
                                    old_master_broker_id=old_master, new_master_broker_id=new_master,
                                    new_master_address=new_address or "", source=source, by=by)
    except IntegrityError:
        return False
    return True


def sample_controller(now: datetime | None = None) -> dict[str, int]:
    """One pass (see the module docstring); returns ``{"sets", "snapshots", "elections"}``."""
    now = now or timezone.now()
    table = broker_client.controller_admin().sync_state_data(broker_names(now))
    snapshots = elections = 0
    for name, info in sorted(table.items()):
        prev = ControllerSnapshot.objects.filter(broker_name=name).first()
        if prev is not None and _same(prev, info):
            continue
        in_sync, not_in_sync = _replicas(info)
        ControllerSnapshot.objects.create(
            timestamp=now, broker_name=name, master_broker_id=info.master_broker_id,
            master_address=info.master_address or "", master_epoch=info.master_epoch,
            sync_state_set_epoch=info.sync_state_set_epoch, in_sync=in_sync, not_in_sync=not_in_sync)
        snapshots += 1
        if prev is not None and info.master_epoch > prev.master_epoch:
            elections += record_election(name, info.master_epoch, prev.master_broker_id, info.master_broker_id,
                                         info.master_address, now)
    return {"sets": len(table), "snapshots": snapshots, "elections": elections}
