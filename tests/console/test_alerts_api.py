"""The alert REST endpoints per role: viewers read, operators and admins change; validation, the JSON error
format, audit events, silence, delete keeping history."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from console.alerts.models import Alert, AlertRule
from console.models import AuditEvent


@pytest.fixture(autouse=True)
def _local_webhooks(settings: Any) -> None:
    """These rules name local webhook URLs, which only an allow-list lets through."""
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]

RULE = {"name": "orders behind", "kind": "group_lag_messages", "target": "billing", "threshold": 100,
        "emails": ["ops@example.com"], "webhook_url": "http://127.0.0.1:9/hook"}


def _alert(rule: AlertRule | None = None, state: str = Alert.FIRING) -> Alert:
    rule = rule or AlertRule.objects.create(name="r", kind="disk_ratio", target="*", threshold=0.9)
    return Alert.objects.create(rule=rule, rule_name=rule.name, kind=rule.kind, subject="broker-a", state=state,
                                value=0.95, threshold=rule.threshold, started=timezone.now(),
                                fired_at=timezone.now())


def test_operator_creates_updates_silences_and_deletes_a_rule(operator: APIClient) -> None:
    resp = operator.post("/api/v1/alert-rules/", RULE, format="json")
    assert resp.status_code == 201, resp.json()
    rule = resp.json()
    assert {k: rule[k] for k in RULE} == RULE
    assert (rule["for_evaluations"], rule["repeat_minutes"], rule["enabled"], rule["silenced"]) == (1, 0, True, False)

    dup = operator.post("/api/v1/alert-rules/", RULE, format="json")
    assert dup.status_code == 409 and dup.json()["error"] == "rule_exists"

    url = f"/api/v1/alert-rules/{rule['id']}/"
    resp = operator.patch(url, {"threshold": 250, "for_evaluations": 3}, format="json")
    assert resp.status_code == 200 and (resp.json()["threshold"], resp.json()["for_evaluations"]) == (250, 3)

    resp = operator.post(url + "silence/", {"minutes": 30}, format="json")
    assert resp.status_code == 200 and resp.json()["silenced"] is True
    assert AlertRule.objects.get().silenced_until > timezone.now()
    resp = operator.post(url + "silence/", {"minutes": 0}, format="json")
    assert resp.json()["silenced"] is False and resp.json()["silenced_until"] is None

    alert = _alert(AlertRule.objects.get())
    assert operator.delete(url).status_code == 204
    assert operator.get(url).status_code == 404
    alert.refresh_from_db()  # the history stays, closed
    assert (alert.rule_id, alert.rule_name, alert.state, alert.resolved_by) == (None, "orders behind", "resolved",
                                                                               "rule deleted")
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "username", "target"))
    assert actions == [("alert_rule.create", "otto", "orders behind"), ("alert_rule.update", "otto", "orders behind"),
                       ("alert_rule.silence", "otto", "orders behind"), ("alert_rule.silence", "otto", "orders behind"),
                       ("alert_rule.delete", "otto", "orders behind")]
    update = AuditEvent.objects.get(action="alert_rule.update")
    assert (update.before["threshold"], update.after["threshold"]) == (100, 250)


def test_validation_errors_are_json_400s(admin: APIClient) -> None:
    bad = [
        {**RULE, "kind": "disk_ratio", "threshold": 85},
        {**RULE, "threshold": 0},
        {**RULE, "kind": "nope"},
        {**RULE, "webhook_url": "ftp://example.com/x"},
        {**RULE, "webhook_url": "not a url"},
        {**RULE, "emails": ["not-an-address"]},
        {**RULE, "for_evaluations": 0},
        {k: v for k, v in RULE.items() if k != "name"},
    ]
    for body in bad:
        resp = admin.post("/api/v1/alert-rules/", body, format="json")
        assert resp.status_code == 400, (body, resp.json())
        assert resp.json()["error"] == "invalid" and resp.json()["detail"]
    missing = admin.post("/api/v1/alert-rules/", {"name": "gone", "kind": "broker_missing", "target": "broker-b",
                                                   "threshold": 123}, format="json")
    assert missing.status_code == 201 and missing.json()["threshold"] == 1  # ignored by this kind
    rid = missing.json()["id"]
    assert admin.patch(f"/api/v1/alert-rules/{rid}/", {}, format="json").status_code == 400
    resp = admin.patch(f"/api/v1/alert-rules/{rid}/", {"kind": "disk_ratio"}, format="json")  # 1 fits a ratio
    assert resp.status_code == 200
    resp = admin.patch(f"/api/v1/alert-rules/{rid}/", {"threshold": 2}, format="json")
    assert resp.status_code == 400 and "ratio" in resp.json()["detail"]
    assert admin.post(f"/api/v1/alert-rules/{rid}/silence/", {"minutes": -1}, format="json").status_code == 400
    assert admin.get("/api/v1/alerts/?state=burning").status_code == 400
    assert admin.get("/api/v1/alert-rules/99999/").json()["error"] == "not_found"
    assert admin.post("/api/v1/alerts/99999/resolve/").status_code == 404
    assert admin.get(f"/api/v1/alert-rules/{2**70}/").status_code == 404


def test_viewers_read_and_cannot_change(viewer: APIClient, nobody: APIClient) -> None:
    alert = _alert()
    rule_url = f"/api/v1/alert-rules/{alert.rule_id}/"
    rules = viewer.get("/api/v1/alert-rules/").json()
    assert rules["count"] == 1 and rules["results"][0]["firing"] == 1
    assert viewer.get(rule_url).status_code == 200
    listed = viewer.get("/api/v1/alerts/?state=firing").json()
    assert [a["id"] for a in listed["results"]] == [alert.pk] and listed["results"][0]["notifications"] == []
    assert viewer.get("/api/v1/alerts/?state=resolved").json()["count"] == 0
    assert viewer.get(f"/api/v1/alerts/?rule={alert.rule_id}").json()["count"] == 1
    for method, url, body in (("post", "/api/v1/alert-rules/", RULE), ("patch", rule_url, {"threshold": 0.5}),
                              ("delete", rule_url, None), ("post", rule_url + "silence/", {"minutes": 5}),
                              ("post", f"/api/v1/alerts/{alert.pk}/resolve/", None)):
        resp = getattr(viewer, method)(url, body, format="json")
        assert resp.status_code == 403 and resp.json()["error"] == "permission_denied", (method, url)
    assert nobody.get("/api/v1/alerts/").status_code == 403
    assert APIClient().get("/api/v1/alert-rules/").status_code == 401
    assert not AuditEvent.objects.exists()


def test_resolve_by_hand_is_audited(admin: Any) -> None:
    alert = _alert()
    resp = admin.post(f"/api/v1/alerts/{alert.pk}/resolve/")
    assert resp.status_code == 200 and resp.json()["state"] == "resolved" and resp.json()["resolved_by"] == "ada"
    event = AuditEvent.objects.get(action="alert.resolve")
    assert (event.target, event.before["state"], event.after["state"]) == ("r: broker-a", "firing", "resolved")
    again = admin.post(f"/api/v1/alerts/{alert.pk}/resolve/")
    assert again.status_code == 409 and again.json()["error"] == "already_resolved"
