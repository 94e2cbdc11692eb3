"""Topic services (create, update, delete) with their audit trail, against the in-memory FakeAdmin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from console.errors import ApiError
from console.models import AuditEvent
from console.selectors.topics import find_topic, get_topic, list_topics
from console.services import topics as service
from tests.unit.console.fake_admin import FakeAdmin

pytestmark = pytest.mark.django_db


@pytest.fixture
def user() -> User:
    return User.objects.create_user("ops", password="x")


def test_create_on_chosen_brokers_is_audited(fake_admin: FakeAdmin, user: User) -> None:
    after = service.create_topic(user, "Orders", 8, 8, 6, brokers=["broker-b"])
    assert after == {"name": "Orders", "type": "normal", "brokers": [
        {"broker_name": "broker-b", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6}]}
    assert fake_admin.topics == {"Orders": {"broker-b": (8, 8, 6)}}
    assert get_topic("Orders")["brokers"] == after["brokers"]
    event = AuditEvent.objects.get(action="topic.create")
    assert (event.target, event.ok, event.username, event.after) == ("Orders", True, "ops", after)


def test_create_refuses_an_existing_topic_and_unknown_brokers(fake_admin: FakeAdmin, user: User) -> None:
    service.create_topic(user, "Orders", 4, 4, 6)
    with pytest.raises(ApiError) as exists:
        service.create_topic(user, "Orders", 4, 4, 6)
    assert exists.value.status_code == 409
    with pytest.raises(ApiError) as unknown:
        service.create_topic(user, "Other", 4, 4, 6, brokers=["broker-z"])
    assert unknown.value.status_code == 400 and "broker-z" in str(unknown.value.detail)
    assert "Other" not in fake_admin.topics
    with pytest.raises(ApiError) as bad:
        service.create_topic(user, "bad name!", 4, 4, 6)
    assert bad.value.status_code == 400


def test_update_then_delete(fake_admin: FakeAdmin, user: User) -> None:
    service.create_topic(user, "Orders", 4, 4, 6)
    after = service.update_topic(user, "Orders", {"perm": 4, "write_queue_nums": 2})
    assert {b["broker_name"]: (b["write_queue_nums"], b["perm"]) for b in after["brokers"]} == {
        "broker-a": (2, 4), "broker-b": (2, 4)}
    assert fake_admin.topics["Orders"] == {"broker-a": (4, 2, 4), "broker-b": (4, 2, 4)}
    update = AuditEvent.objects.get(action="topic.update")
    assert update.before["brokers"][0]["perm"] == 6 and update.after["brokers"][0]["perm"] == 4
    service.delete_topic(user, "Orders")
    assert find_topic("Orders") is None and [t["name"] for t in list_topics()] == []
    assert AuditEvent.objects.filter(action="topic.delete", target="Orders", ok=True).exists()
