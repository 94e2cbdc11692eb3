"""Alert evaluation with hand-made samples (each kind: fires once, no repeat spam, resolves; silence, repeat,
hand resolve, stale data, channel failures), notifications to a real local HTTP receiver and Django's locmem
email backend; ``broker_missing`` against the suite's real name server (``broker-a`` registered)."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from console.alerts.models import Alert, AlertRule, Notification
from console.alerts.services import evaluate
from console.monitoring.models import BrokerSample, JobRun, LagSample
from tests.integration.cluster import free_port


class WebhookReceiver:
    """A tiny HTTP server on a free port (chosen by the OS) recording every JSON body POSTed to it."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.status = status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def events(self) -> list[tuple[str, str]]:
        return [(b["event"], b["alert"]["subject"]) for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook(settings: Any) -> Any:
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the receiver is local (refused by default)
    r = WebhookReceiver()
    yield r
    r.close()


T0 = timezone.now().replace(microsecond=0)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def lag(minute: float, group: str = "g1", topic: str = "Orders", lag: int = 0, seconds: float | None = None,
        dlq: int = 0) -> LagSample:
    return LagSample.objects.create(timestamp=at(minute), group=group, topic=topic, lag=lag, lag_seconds=seconds,
                                    dlq_size=dlq)


def rule(kind: str = AlertRule.GROUP_LAG_MESSAGES, target: str = "g1", threshold: float = 10,
         **kw: Any) -> AlertRule:
    return AlertRule.objects.create(name=kw.pop("name", f"{kind}-{target}"), kind=kind, target=target,
                                    threshold=threshold, **kw)


def test_lag_in_messages_fires_once_and_resolves_by_webhook_and_email(hook: WebhookReceiver) -> None:
    r = rule(webhook_url=hook.url, emails=["ops@example.com", "oncall@example.com"])
    lag(0, lag=5)
    lag(0, group="other", lag=500)  # another group: not this rule's target
    assert evaluate(at(0)).fired == 0 and not Alert.objects.exists()

    lag(1, lag=20)
    report = evaluate(at(1))
    assert (report.fired, report.notifications, report.firing) == (1, 2, 1)
    alert = Alert.objects.get()
    assert (alert.state, alert.subject, alert.value, alert.rule_id) == (Alert.FIRING, "g1/Orders", 20, r.pk)
    assert hook.events() == [("firing", "g1/Orders")]
    body = hook.bodies[0]
    assert body["status"] == "firing" and body["alert"]["value"] == 20 and body["alert"]["threshold"] == 10
    assert "lag of g1/Orders is 20 messages" in body["alert"]["summary"]
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ops@example.com", "oncall@example.com"]
    assert mail.outbox[0].subject.startswith("[FIRING]")

    for minute, value in ((2, 30), (3, 40)):  # still behind: no more notifications
        lag(minute, lag=value)
        assert evaluate(at(minute)).notifications == 0
    alert.refresh_from_db()
    assert (alert.state, alert.value, alert.breaches) == (Alert.FIRING, 40, 3)
    assert len(hook.bodies) == 1 and len(mail.outbox) == 1

    lag(4, lag=2)
    report = evaluate(at(4))
    assert report.resolved == 1 and report.firing == 0
    alert.refresh_from_db()
    assert (alert.state, alert.resolved_at, alert.resolved_by) == (Alert.RESOLVED, at(4), "")
    assert hook.events() == [("firing", "g1/Orders"), ("resolved", "g1/Orders")]
    assert hook.bodies[1]["status"] == "resolved" and hook.bodies[1]["alert"]["value"] == 2
    assert [m.subject.split("]")[0] for m in mail.outbox] == ["[FIRING", "[RESOLVED"]
    assert sorted(Notification.objects.values_list("event", "channel", "ok", "status_code")) == [
        ("firing", "email", True, None), ("firing", "webhook", True, 200),
        ("resolved", "email", True, None), ("resolved", "webhook", True, 200)]

    lag(5, lag=50)  # behind again: a new alert
    evaluate(at(5))
    assert Alert.objects.filter(state=Alert.FIRING).count() == 1 and Alert.objects.count() == 2


def test_for_evaluations_needs_consecutive_breaches(hook: WebhookReceiver) -> None:
    rule(for_evaluations=2, webhook_url=hook.url)
    lag(0, lag=20)
    assert evaluate(at(0)).pending == 1 and not hook.bodies
    lag(1, lag=1)  # cleared before firing: the pending alert goes away
    evaluate(at(1))
    assert not Alert.objects.exists()
    lag(2, lag=20)
    lag(3, lag=25)
    evaluate(at(2))
    assert evaluate(at(3)).fired == 1
    assert hook.events() == [("firing", "g1/Orders")]


def test_lag_in_seconds_ignores_unknown_values() -> None:
    rule(AlertRule.GROUP_LAG_SECONDS, "g*", 60)
    lag(0, seconds=None, lag=100)
    lag(0, group="g2", seconds=30)
    assert evaluate(at(0)).fired == 0
    lag(1, seconds=120)
    lag(1, group="g2", seconds=59.5)
    evaluate(at(1))
    assert list(Alert.objects.values_list("subject", "state", "value")) == [("g1/Orders", "firing", 120)]
    lag(2, seconds=None)  # unknown: neither still firing nor resolved by it
    lag(2, group="g2", seconds=1)
    evaluate(at(2))
    assert Alert.objects.get().state == Alert.FIRING


def test_dlq_growth_compares_with_the_oldest_sample_in_the_window(hook: WebhookReceiver) -> None:
    rule(AlertRule.DLQ_GROWTH, "g1", 5, window_minutes=10, webhook_url=hook.url)
    lag(0, dlq=100)
    lag(0, topic="Other", dlq=100)  # the DLQ size repeats on each of the group's topic rows
    lag(4, dlq=103)
    lag(4, topic="Other", dlq=103)
    assert evaluate(at(4)).fired == 0
    lag(8, dlq=106)
    evaluate(at(8))
    alert = Alert.objects.get()
    assert (alert.subject, alert.value, alert.state) == ("g1", 6, Alert.FIRING)
    lag(16, dlq=106)  # window [6, 16]: 106 - 106, no growth
    evaluate(at(16))
    alert.refresh_from_db()
    assert alert.state == Alert.RESOLVED and hook.events() == [("firing", "g1"), ("resolved", "g1")]


def test_disk_ratio_from_disk_check_runs_and_broker_samples() -> None:
    rule(AlertRule.DISK_RATIO, "broker-*", 0.85)
    JobRun.objects.create(job="disk_check", broker="broker-x", started=at(0), finished=at(0), outcome="failed",
                          counts={"disk_ratio": 0.92, "state": "full"})
    JobRun.objects.create(job="disk_check", broker="broker-y", started=at(0), finished=at(0), outcome="ok",
                          counts={"disk_ratio": 0.40})
    JobRun.objects.create(job="disk_check", broker="other", started=at(0), finished=at(0), outcome="ok",
                          counts={"disk_ratio": 0.99})
    evaluate(at(0.5))
    assert list(Alert.objects.values_list("subject", "state", "value")) == [("broker-x", "firing", 0.92)]
    BrokerSample.objects.create(timestamp=at(1), broker="broker-x", disk_ratio=0.5)  # newer reading
    evaluate(at(1))
    assert Alert.objects.get().state == Alert.RESOLVED


def test_broker_missing_against_the_real_name_server(hook: WebhookReceiver) -> None:
    rule(AlertRule.BROKER_MISSING, "broker-a", name="a", webhook_url=hook.url)
    rule(AlertRule.BROKER_MISSING, "broker-never-registered", name="zz", webhook_url=hook.url)
    now = timezone.now()
    JobRun.objects.create(job="retention", broker="broker-gone", started=now - timedelta(hours=2),
                          finished=now - timedelta(hours=2), outcome="ok")
    rule(AlertRule.BROKER_MISSING, "*", name="any")
    report = evaluate(now)
    assert not report.errors
    assert sorted(Alert.objects.values_list("rule_name", "subject", "state")) == [
        ("any", "broker-gone", "firing"), ("zz", "broker-never-registered", "firing")]
    assert hook.events() == [("firing", "broker-never-registered")]
    assert "not registered" in hook.bodies[0]["alert"]["summary"]


def test_unreachable_name_server_is_an_error_not_a_missing_broker(broker_down: str) -> None:
    rule(AlertRule.BROKER_MISSING, "broker-a", name="a")
    r2 = rule()
    lag(0, lag=99)
    report = evaluate(at(0))
    assert report.errors and report.errors[0].startswith("a: ")
    assert list(Alert.objects.values_list("rule_id", "state")) == [(r2.pk, "firing")]


def test_silenced_rules_record_but_notify_only_after_the_silence(hook: WebhookReceiver) -> None:
    r = rule(webhook_url=hook.url, emails=["ops@example.com"], silenced_until=at(2.5))
    lag(0, lag=20)
    evaluate(at(0))
    assert Alert.objects.get().state == Alert.FIRING and not hook.bodies and not mail.outbox
    lag(1, lag=2)
    evaluate(at(1))  # fired and resolved during the silence: nothing sent at all
    assert Alert.objects.get().state == Alert.RESOLVED and not hook.bodies and not mail.outbox
    lag(2, lag=30)
    evaluate(at(2))
    lag(3, lag=30)
    evaluate(at(3))  # silence over, still firing: told once, late
    assert hook.events() == [("firing", "g1/Orders")] and len(mail.outbox) == 1
    lag(4, lag=30)
    evaluate(at(4))
    assert len(hook.bodies) == 1
    r.silenced_until = at(10)
    r.save()
    lag(5, lag=0)
    evaluate(at(5))  # resolved while silenced again: not sent
    assert len(hook.bodies) == 1


def test_repeat_interval_renotifies_while_firing(hook: WebhookReceiver) -> None:
    rule(webhook_url=hook.url, repeat_minutes=5)
    for minute in range(0, 12):
        lag(minute, lag=50)
        evaluate(at(minute))
    assert [e for e, _ in hook.events()] == ["firing", "repeat", "repeat"]  # at 0, 5 and 10


def test_resolved_by_hand_stays_closed_until_the_condition_clears(hook: WebhookReceiver, operator: Any) -> None:
    rule(webhook_url=hook.url)
    lag(0, lag=20)
    evaluate(at(0))
    alert = Alert.objects.get()
    resp = operator.post(f"/api/v1/alerts/{alert.pk}/resolve/")
    assert resp.status_code == 200, resp.json()
    assert resp.json()["state"] == "resolved" and resp.json()["resolved_by"] == "otto"
    assert hook.events() == [("firing", "g1/Orders"), ("resolved", "g1/Orders")]
    assert operator.post(f"/api/v1/alerts/{alert.pk}/resolve/").status_code == 409
    lag(1, lag=25)
    evaluate(at(1))  # still behind: no new alert, no notification
    assert Alert.objects.count() == 1 and len(hook.bodies) == 2
    lag(2, lag=0)
    evaluate(at(2))
    lag(3, lag=20)
    evaluate(at(3))  # cleared once, behind again: a new alert
    assert Alert.objects.filter(state=Alert.FIRING).count() == 1 and len(hook.bodies) == 3


def test_stale_samples_change_nothing_and_vanished_groups_resolve() -> None:
    rule(target="*")
    lag(0, lag=20)
    lag(0, group="g2", lag=20)
    evaluate(at(0))
    assert Alert.objects.filter(state=Alert.FIRING).count() == 2
    evaluate(at(30))  # the newest sampling is 30 minutes old: unknown, nothing changes
    assert Alert.objects.filter(state=Alert.FIRING).count() == 2
    lag(31, lag=20)  # g2 no longer sampled (gone from the known groups)
    evaluate(at(31))
    assert dict(Alert.objects.values_list("subject", "state")) == {"g1/Orders": "firing", "g2/Orders": "resolved"}


def test_failing_channels_are_recorded_and_never_stop_the_evaluation(settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    failing = WebhookReceiver(status=500)
    try:
        rule(name="five-hundred", webhook_url=failing.url)
        rule(name="nobody-listens", webhook_url=f"http://127.0.0.1:{free_port()}/hook")
        lag(0, lag=20)
        report = evaluate(at(0))
    finally:
        failing.close()
    assert (report.fired, report.notifications, report.notification_failures) == (2, 2, 2)
    notes = {n.alert.rule_name: n for n in Notification.objects.select_related("alert")}
    assert (notes["five-hundred"].ok, notes["five-hundred"].status_code) == (False, 500)
    assert not notes["nobody-listens"].ok and "ConnectionError" in notes["nobody-listens"].error
    assert Alert.objects.filter(state=Alert.FIRING).count() == 2


def test_disabling_a_rule_resolves_its_alerts_quietly(hook: WebhookReceiver) -> None:
    r = rule(webhook_url=hook.url)
    lag(0, lag=20)
    evaluate(at(0))
    r.enabled = False
    r.save()
    evaluate(at(1))
    alert = Alert.objects.get()
    assert (alert.state, alert.resolved_by) == (Alert.RESOLVED, "rule disabled")
    assert hook.events() == [("firing", "g1/Orders")]
