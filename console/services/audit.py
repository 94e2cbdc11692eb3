"""Recording audit events around broker operations.

:func:`record` writes each event as one ``INSERT`` of the row's columns, in the caller's transaction (autocommit:
committed before it returns), with the values Django's fields prepare for that database (the JSON columns, the
``auto_now_add`` time). It is what ``AuditEvent.objects.create`` wrote, without building a model instance, its
``pre_save``/``post_save`` signals (no receiver listens for this model) or ``RETURNING id``: that path was about a
fifth of a one-message REST produce. ``tests/console/test_audit_write.py`` holds both rows equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.utils import timezone

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


_inserts: dict[tuple[str, str, str], tuple[str, list[Field]]] = {}  # (alias, vendor, table) -> (SQL, fields)


def _insert(connection: BaseDatabaseWrapper) -> tuple[str, list[Field]]:
    """The ``INSERT`` of one audit row on ``connection`` (every concrete column but the id) and the fields that
    prepare its values, built once."""
    meta = AuditEvent._meta
    key = (connection.alias, connection.vendor, meta.db_table)
    found = _inserts.get(key)
    if found is None:
        fields = [cast(Field, f) for f in meta.concrete_fields if not f.primary_key]
        qn = connection.ops.quote_name
        sql = (f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
               f"VALUES ({', '.join(['%s'] * len(fields))})")
        found = _inserts[key] = (sql, fields)
    return found


def record(user: Any, action: str, target: str, *, before: Any = None, after: Any = None, ok: bool = True) -> None:
    """Write one audit event for ``user`` (None or anonymous for the system); committed on return unless the
    caller holds a transaction open. A column added to AuditEvent without a value here fails with KeyError
    naming it (tests/console/test_audit_write.py writes every kind of row)."""
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    using = router.db_for_write(AuditEvent)
    connection = connections[using]
    sql, fields = _insert(connection)
    values = {"user": user.pk if authenticated else None, "username": user.get_username() if authenticated else "",
              "timestamp": timezone.now(), "action": action, "target": target, "before": before, "after": after,
              "ok": ok}
    params = [f.get_db_prep_save(values[f.name], connection) for f in fields]
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(sql, params)


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
