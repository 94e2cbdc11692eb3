"""Reads for controller mode (RocketMQ 5 automatic failover): each broker-set's master, epochs and SyncStateSet
from the controller now, with its recorded election history."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from broker_core.client import ClientError
from console import broker_client
from console.monitoring.controller_sampling import broker_names
from console.monitoring.models import Election

HISTORY = 10


def enabled() -> bool:
    return bool(broker_client.controller_addr())


def election_history(broker_name: str, limit: int = HISTORY) -> list[dict[str, Any]]:
    return [{"detected_at": e.detected_at, "master_epoch": e.master_epoch, "old": e.old_master_broker_id,
             "new": e.new_master_broker_id, "address": e.new_master_address, "source": e.source, "by": e.by}
            for e in Election.objects.filter(broker_name=broker_name)[:limit]]


def controller_groups() -> dict[str, Any]:
    """``{"enabled", "error", "leader", "groups": [...]}``; each group: name, cluster, master id and address,
    epochs, replicas (id, address, alive, in_sync, master, electable) and the election history. A controller
    that cannot be reached gives ``error`` and no groups (the rest of the page still renders)."""
    if not enabled():
        return {"enabled": False, "error": "", "leader": None, "groups": []}
    admin = broker_client.controller_admin()
    try:
        leader = admin.leader(refresh=True)
        table = admin.sync_state_data(broker_names(timezone.now()))
    except (ClientError, ConnectionError, TimeoutError) as exc:
        return {"enabled": True, "error": str(exc), "leader": None, "groups": []}
    clusters = {}
    try:
        for name, data in broker_client.admin().cluster_info().get("brokerAddrTable", {}).items():
            clusters[name] = data.get("cluster", "")
    except (ClientError, ConnectionError, TimeoutError):
        pass
    groups = []
    for name, info in sorted(table.items()):
        replicas: list[dict[str, Any]] = []
        for r, in_sync in [(r, True) for r in info.in_sync_replicas] + [(r, False) for r in info.not_in_sync_replicas]:
            master = r.broker_id == info.master_broker_id
            replicas.append({"broker_id": r.broker_id, "address": r.broker_address, "alive": r.alive,
                             "in_sync": in_sync, "master": master, "electable": in_sync and r.alive and not master})
        replicas.sort(key=lambda x: x["broker_id"])
        groups.append({"name": name, "cluster": clusters.get(name, ""), "master_broker_id": info.master_broker_id,
                       "master_address": info.master_address, "master_epoch": info.master_epoch,
                       "sync_state_set_epoch": info.sync_state_set_epoch,
                       "sync_state_set": [r.broker_id for r in info.in_sync_replicas], "replicas": replicas,
                       "history": election_history(name)})
    return {"enabled": True, "error": "", "leader": leader, "groups": groups}
