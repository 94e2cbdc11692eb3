"""Consumer group changes: resetting a group's offsets on a topic, audited with before/after."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.selectors.broker_cache import invalidate_all
from console.selectors.groups import ResetTarget, reset_preview
from console.services.audit import audited


def reset_offset(user: Any, group: str, topic: str, target: ResetTarget) -> dict[str, Any]:
    """Move ``group``'s committed offsets on ``topic`` to ``target`` through ``AdminClient.reset_offset`` (the
    broker also tells running consumers of the group to restart from there).

    Returns the preview taken just before (see :func:`reset_preview`) with each queue's ``applied_offset`` as
    the broker reports it; the audit event holds the offsets before and after.
    """
    plan = reset_preview(group, topic, target)
    before = {"target": plan["target"], "offsets": [
        {"broker": q["broker_name"], "queue_id": q["queue_id"], "offset": q["current_offset"]} for q in plan["queues"]]}
    with audited(user, "group.reset_offset", f"{group}/{topic}", before) as entry:
        if target.offsets is not None:
            applied = broker_client.admin().reset_offset(group, topic, offsets=target.offsets)
        else:
            applied = broker_client.admin().reset_offset(group, topic, timestamp_ms=target.timestamp_ms)
        entry.after = {"offsets": [{"broker": b, "queue_id": q, "offset": o} for (b, q), o in sorted(applied.items())]}
    invalidate_all()  # the group list shows the offsets and this console's audit at once
    for q in plan["queues"]:
        q["applied_offset"] = applied.get((q["broker_name"], q["queue_id"]))
    return plan
