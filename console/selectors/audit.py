"""Audit log reads, newest first, with an id cursor."""

from __future__ import annotations

from typing import Any

from console.errors import bad_request
from console.models import AuditEvent


def audit_json(event: AuditEvent) -> dict[str, Any]:
    """The API shape of one audit event."""
    return {"id": event.id, "timestamp": event.timestamp.isoformat(), "user": event.username or None,
            "action": event.action, "target": event.target, "before": event.before, "after": event.after,
            "ok": event.ok}


def audit_page(action: str = "", user: str = "", target: str = "", cursor: str = "",
               limit: int = 100) -> dict[str, Any]:
    """One page of events matching the filters; ``next`` is the cursor of the following page or None."""
    qs = AuditEvent.objects.order_by("-id")
    if action:
        qs = qs.filter(action=action)
    if user:
        qs = qs.filter(username=user)
    if target:
        qs = qs.filter(target__icontains=target)
    if cursor:
        if not cursor.isdigit():
            raise bad_request("invalid_cursor", f"cursor {cursor!r} is not one this API returned")
        qs = qs.filter(id__lt=int(cursor))
    events = list(qs[:limit + 1])
    more = len(events) > limit
    events = events[:limit]
    return {"results": [audit_json(e) for e in events], "next": str(events[-1].id) if more else None}
