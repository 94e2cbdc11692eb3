"""Recording audit events around broker operations."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from broker_core.client import ClientError
from console.models import AuditEvent

# Failures worth recording before they propagate to the exception handler.
RECORDED_ERRORS = (ClientError, ConnectionError, TimeoutError, ValueError)


@dataclass
class AuditEntry:
    """What a service fills in while its operation runs; ``after`` and ``ok`` may be set by the service."""

    action: str
    target: str
    before: Any = None
    after: Any = None
    ok: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def record(user: Any, action: str, target: str, *, before: Any = None, after: Any = None,
           ok: bool = True) -> AuditEvent:
    """Write one audit event for ``user`` (None or anonymous for the system)."""
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    return AuditEvent.objects.create(user=user if authenticated else None,
                                     username=user.get_username() if authenticated else "",
                                     action=action, target=target, before=before, after=after, ok=ok)


@contextmanager
def audited(user: Any, action: str, target: str, before: Any = None) -> Iterator[AuditEntry]:
    """Run the body as an audited operation: records the entry on success, and on a broker or input
    failure records ``ok=False`` with the error and re-raises it."""
    entry = AuditEntry(action, target, before)
    try:
        yield entry
    except RECORDED_ERRORS as exc:
        record(user, action, target, before=before, after={"error": str(exc)}, ok=False)
        raise
    record(user, action, target, before=entry.before, after=entry.after, ok=entry.ok)


def call_audited(user: Any, action: str, target: str, fn: Callable[[], Any], before: Any = None) -> Any:
    """``fn()`` inside :func:`audited`, with its result as ``after``."""
    with audited(user, action, target, before) as entry:
        entry.after = fn()
    return entry.after
