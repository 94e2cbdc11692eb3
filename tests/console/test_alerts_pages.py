"""The alerts page: what viewers see, what operators change (create, edit, silence, delete and resolve behind
confirmation pages), audit events."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from console.alerts.models import Alert, AlertRule
from console.models import AuditEvent


@pytest.fixture(autouse=True)
def _local_webhooks(settings: Any) -> None:
    """These rules name local webhook URLs, which only an allow-list lets through."""
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


def _page_client(role: str, username: str) -> Client:
    user = User.objects.create_user(username, password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def _firing() -> Alert:
    rule = AlertRule.objects.create(name="disk full", kind="disk_ratio", target="broker-*", threshold=0.9,
                                    webhook_url="http://127.0.0.1:9/x")
    return Alert.objects.create(rule=rule, rule_name=rule.name, kind=rule.kind, subject="broker-a", value=0.93,
                                threshold=0.9, state=Alert.FIRING, started=timezone.now(), fired_at=timezone.now())


FORM = {"name": "billing behind", "kind": "group_lag_messages", "target": "billing", "threshold": "500",
        "for_evaluations": "2", "window_minutes": "10", "emails": "ops@example.com, oncall@example.com",
        "webhook_url": "https://hooks.example.com/alerts", "repeat_minutes": "0", "enabled": "on"}


def test_viewers_see_rules_firing_alerts_and_history_without_controls() -> None:
    alert = _firing()
    client = _page_client("viewer", "pagevera")
    page = client.get("/alerts/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="alert-rules"' in html and "disk full" in html and "broker-a" in html
    assert 'data-testid="create-rule"' not in html and "Resolve…" not in html and "Delete…" not in html
    assert 'aria-current="page">Alerts</a>' in html
    assert client.post("/alerts/rules/new/", FORM).status_code == 403
    assert client.post(f"/alerts/{alert.pk}/resolve/").status_code == 403
    assert Alert.objects.get().state == Alert.FIRING and not AuditEvent.objects.exists()


def test_operators_create_edit_silence_delete_and_resolve() -> None:
    alert = _firing()
    client = _page_client("operator", "pageotto")
    assert 'data-testid="create-rule"' in client.get("/alerts/").content.decode()

    bad = client.post("/alerts/rules/new/", {**FORM, "kind": "disk_ratio", "emails": "nope"})
    assert bad.status_code == 400 and b"not an email address" in bad.content and b"ratio in (0, 1]" in bad.content
    resp = client.post("/alerts/rules/new/", FORM)
    assert resp.status_code == 302
    rule = AlertRule.objects.get(name="billing behind")
    assert (rule.threshold, rule.for_evaluations, rule.emails) == (500, 2, ["ops@example.com", "oncall@example.com"])

    edit = client.get(f"/alerts/rules/{rule.pk}/edit/")
    assert edit.status_code == 200 and b"ops@example.com, oncall@example.com" in edit.content
    assert client.post(f"/alerts/rules/{rule.pk}/edit/", {**FORM, "threshold": "800"}).status_code == 302
    rule.refresh_from_db()
    assert rule.threshold == 800

    assert client.post(f"/alerts/rules/{rule.pk}/silence/", {"minutes": "60"}).status_code == 302
    rule.refresh_from_db()
    assert rule.silenced_until > timezone.now()
    assert b"silenced until" in client.get("/alerts/").content

    confirm = client.get(f"/alerts/{alert.pk}/resolve/")
    assert confirm.status_code == 200 and b"Resolve alert" in confirm.content
    assert Alert.objects.get(pk=alert.pk).state == Alert.FIRING  # the GET changes nothing
    assert client.post(f"/alerts/{alert.pk}/resolve/").status_code == 302
    alert.refresh_from_db()
    assert (alert.state, alert.resolved_by) == (Alert.RESOLVED, "pageotto")

    confirm = client.get(f"/alerts/rules/{rule.pk}/delete/")
    assert confirm.status_code == 200 and b"Delete rule" in confirm.content
    assert AlertRule.objects.filter(pk=rule.pk).exists()
    assert client.post(f"/alerts/rules/{rule.pk}/delete/").status_code == 302
    assert not AlertRule.objects.filter(pk=rule.pk).exists()
    assert client.get("/alerts/rules/999999/edit/").status_code == 404

    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "alert_rule.create", "alert_rule.update", "alert_rule.silence", "alert.resolve", "alert_rule.delete"]
    history = client.get("/alerts/").content.decode()
    assert "pageotto" in history  # the hand-resolved alert in the history
