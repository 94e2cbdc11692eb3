"""Viewers do not see webhook URLs (which often carry a secret): not in the API, not on the alerts page."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.alerts.models import Alert, AlertRule, Notification

SECRET_URL = "https://hooks.example.com/services/T0/B0/s3cr3t-token"


def _rule_with_history() -> AlertRule:
    rule = AlertRule.objects.create(name="lagging", kind="group_lag_messages", target="g", threshold=1,
                                    webhook_url=SECRET_URL, emails=["ops@example.com"])
    alert = Alert.objects.create(rule=rule, rule_name=rule.name, kind=rule.kind, subject="g/T", state=Alert.RESOLVED,
                                 value=5, threshold=1, started=timezone.now(), fired_at=timezone.now(),
                                 resolved_at=timezone.now())
    Notification.objects.create(alert=alert, event="firing", channel=Notification.WEBHOOK, target=SECRET_URL,
                                sent_at=timezone.now(), ok=False, error=f"ConnectTimeout: {SECRET_URL}")
    Notification.objects.create(alert=alert, event="firing", channel=Notification.EMAIL, target="ops@example.com",
                                sent_at=timezone.now(), ok=True)
    return rule


def _page(username: str) -> Client:
    c = Client()
    c.force_login(User.objects.get(username=username))
    return c


def test_viewers_get_no_webhook_url_from_the_api(viewer: APIClient, operator: APIClient) -> None:
    rule = _rule_with_history()
    for path in ("/api/v1/alert-rules/", f"/api/v1/alert-rules/{rule.pk}/", "/api/v1/alerts/"):
        seen = viewer.get(path)
        assert seen.status_code == 200 and "s3cr3t" not in seen.content.decode(), path
        assert "s3cr3t" in operator.get(path).content.decode(), path
    [row] = viewer.get("/api/v1/alert-rules/").json()["results"]
    assert row["webhook_url"] is None and row["has_webhook"] is True and row["emails"] == ["ops@example.com"]
    notes = viewer.get("/api/v1/alerts/").json()["results"][0]["notifications"]
    by_channel = {n["channel"]: n for n in notes}
    assert by_channel["webhook"]["target"] is None and by_channel["email"]["target"] == "ops@example.com"


def test_viewers_get_no_webhook_url_on_the_alerts_page(viewer: APIClient, operator: APIClient) -> None:
    _rule_with_history()
    vera = _page("vera").get("/alerts/")
    assert vera.status_code == 200
    html = vera.content.decode()
    assert "s3cr3t" not in html and 'data-testid="webhook-hidden"' in html
    assert "s3cr3t" in _page("otto").get("/alerts/").content.decode()
