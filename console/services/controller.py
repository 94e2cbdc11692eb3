"""Controller-mode writes from the console: a switch-over (CONTROLLER_ELECT_MASTER with designateElect=true)
that makes a chosen in-sync replica the master of its broker-set. Audited as ``broker.switch_over`` with the
master before and after; a refusal (2011: it is the master already, 2012: not an alive SyncStateSet member) is
audited as failed and raised."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from console import broker_client
from console.errors import ApiError
from console.monitoring.controller_sampling import record_election
from console.monitoring.models import Election
from console.services.audit import audited


def switch_over(user: Any, cluster: str, broker_name: str, broker_id: int) -> dict[str, Any]:
    """Elect ``broker_id`` master of ``broker_name``; 409 ``controller_off`` without ``BROKER_CORE_CONTROLLER``."""
    if not broker_client.controller_addr():
        raise ApiError(409, "controller_off", "no controller is configured (BROKER_CORE_CONTROLLER)")
    admin = broker_client.controller_admin()
    before_info = admin.sync_state_data([broker_name]).get(broker_name)
    before = {"master_broker_id": before_info.master_broker_id if before_info else None,
              "master_epoch": before_info.master_epoch if before_info else None}
    with audited(user, "broker.switch_over", f"{broker_name}/{broker_id}", before=before) as entry:
        result = admin.elect_master(cluster, broker_name, broker_id)
        entry.after = {"master_broker_id": result.master_broker_id, "master_address": result.master_address,
                       "master_epoch": result.master_epoch}
    if result.master_epoch is not None:
        record_election(broker_name, result.master_epoch, before["master_broker_id"], result.master_broker_id,
                        result.master_address, timezone.now(), Election.SWITCH_OVER, user.get_username())
    return dict(entry.after)
