"""The audit write (:func:`console.services.audit.record`, one ``INSERT``) stores exactly the row
``AuditEvent.objects.create`` stored: every column, as the database holds it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection, transaction
from django.utils import timezone

from console.models import AuditEvent
from console.services import audit

AT = datetime(2026, 11, 26, 19, 30, 1, 123456, tzinfo=UTC)


def _raw(pk: int) -> tuple[Any, ...]:
    """The stored columns of one row but its id, as the database returns them (no field conversions)."""
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in AuditEvent._meta.concrete_fields
                        if not f.primary_key)
    with connection.cursor() as cur:
        cur.execute(f"SELECT {columns} FROM {table} WHERE id = %s", [pk])
        return tuple(cur.fetchone())


CASES = [
    ("user", "message.produce", "TopicA", None, {"count": 1, "msg_ids": ["0A01"]}, True),
    ("anonymous", "auth.login", "someone", None, {"ip": "127.0.0.1", "error": "invalid credentials"}, False),
    ("none", "dlq.resend", "g", {"offset_msg_ids": ["x"], "topic": None, "force": False}, {"results": []}, False),
    ("user", "user.preferences", "ümlaut ☃", {"timezone": "UTC"}, {"timezone": "Europe/Berlin", "n": 1.5}, True),
    ("user", "topic.delete", "T", [1, "two", None, True], None, True),
]


@pytest.mark.parametrize("who, action, target, before, after, ok", CASES)
def test_record_stores_the_row_the_orm_stored(monkeypatch: pytest.MonkeyPatch, who: str, action: str,
                                              target: str, before: Any, after: Any, ok: bool) -> None:
    user: Any = {"user": User.objects.create_user("ada"), "anonymous": AnonymousUser(), "none": None}[who]
    monkeypatch.setattr(timezone, "now", lambda: AT)
    authenticated = who == "user"
    orm = AuditEvent.objects.create(user=user if authenticated else None,
                                    username=user.get_username() if authenticated else "",
                                    action=action, target=target, before=before, after=after, ok=ok)
    audit.record(user, action, target, before=before, after=after, ok=ok)
    ours = AuditEvent.objects.latest("id")
    assert ours.pk > orm.pk
    assert _raw(ours.pk) == _raw(orm.pk)
    fields = [f.attname for f in AuditEvent._meta.concrete_fields if f.name != "id"]
    assert [getattr(ours, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert ours.timestamp == AT and ours.before == before and ours.after == after


def test_record_is_part_of_the_callers_transaction() -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        audit.record(None, "topic.create", "rolled-back")
        raise Boom
    audit.record(None, "topic.create", "kept")
    assert list(AuditEvent.objects.values_list("target", flat=True)) == ["kept"]
