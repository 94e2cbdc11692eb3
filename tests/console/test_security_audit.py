"""The audit log covers logins (success and failure), REST receive and ack, and Django-admin changes; and the
Django admin cannot delete or change audit rows, not even a superuser."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from console.models import AuditEvent
from tests.console.test_group_ops import _produce, _receive


def test_logins_are_audited_with_success_and_failure() -> None:
    User.objects.create_user("logan", password="pw-123456")
    client = Client()
    assert client.post("/login/", {"username": "logan", "password": "nope"}).status_code == 200
    assert client.post("/login/", {"username": "logan", "password": "pw-123456"}).status_code == 302
    rows = list(AuditEvent.objects.filter(action="auth.login").order_by("id").values_list("target", "ok", "username"))
    assert rows == [("logan", False, ""), ("logan", True, "logan")]
    failed = AuditEvent.objects.filter(action="auth.login", ok=False).get()
    assert failed.after["ip"] == "127.0.0.1" and "nope" not in str(failed.after)


def test_rest_receive_and_ack_are_audited(operator: APIClient, topic: str, unique: Any) -> None:
    group = unique("audited")
    sent = _produce(operator, topic, 2)
    got = _receive(operator, group, topic, 2)
    resp = operator.post(f"/api/v1/consumer-groups/{group}/ack/",
                         {"topic": topic, "receipt_handles": [m["receipt_handle"] for m in got]}, format="json")
    assert resp.status_code == 200
    received = AuditEvent.objects.filter(action="message.receive", target=f"{group}/{topic}", username="otto")
    ids = {m["msg_id"] for e in received for m in e.after["messages"]}
    assert ids == {m["msg_id"] for m in sent}
    assert all("body" not in str(e.after) and "receipt_handle" not in str(e.after) for e in received)
    ack = AuditEvent.objects.get(action="message.ack", target=f"{group}/{topic}")
    assert ack.ok and ack.username == "otto"


def _superuser_page() -> Client:
    root = User.objects.create_superuser("root-admin", "", "pw")
    client = Client()
    client.force_login(root)
    return client


def test_django_admin_changes_are_audited() -> None:
    client = _superuser_page()
    resp = client.post("/admin/auth/group/add/", {"name": "auditors"})
    assert resp.status_code == 302
    group = Group.objects.get(name="auditors")
    client.post(f"/admin/auth/group/{group.pk}/change/", {"name": "auditors-2"})
    client.post(f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"})
    rows = list(AuditEvent.objects.filter(action__startswith="admin.").order_by("id")
                .values_list("action", "target", "username"))
    assert rows == [("admin.add", f"auth.Group:{group.pk}", "root-admin"),
                    ("admin.change", f"auth.Group:{group.pk}", "root-admin"),
                    ("admin.delete", f"auth.Group:{group.pk}", "root-admin")]


def test_the_admin_cannot_delete_or_change_audit_rows() -> None:
    client = _superuser_page()
    event = AuditEvent.objects.create(action="topic.delete", target="Orders")
    assert client.get(f"/admin/console/auditevent/{event.pk}/delete/").status_code == 403
    assert client.post(f"/admin/console/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk = client.post("/admin/console/auditevent/", {"action": "delete_selected", "_selected_action": [event.pk],
                                                       "post": "yes"})
    assert bulk.status_code in (200, 302)
    changed = client.post(f"/admin/console/auditevent/{event.pk}/change/", {"action": "x", "target": "y"})
    assert changed.status_code == 403
    event.refresh_from_db()
    assert (event.action, event.target) == ("topic.delete", "Orders")
    assert AuditEvent.objects.filter(pk=event.pk).exists()
    listing = client.get("/admin/console/auditevent/")
    assert listing.status_code == 200 and b"delete_selected" not in listing.content
