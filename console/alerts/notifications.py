"""Sending an alert event to a rule's channels: email through Django's email backend (``EMAIL_BACKEND``), and a
JSON ``POST`` to the rule's webhook URL (``ALERTS_WEBHOOK_TIMEOUT_S``, default 5 s; only to public addresses
unless allow-listed, never following a redirect: :mod:`console.alerts.webhook_guard`). Every attempt is a
:class:`~console.alerts.models.Notification` row; a channel that fails is recorded with its error and never
raises into the evaluation.

The webhook body::

    {"event": "firing" | "repeat" | "resolved", "status": "firing" | "resolved",
     "alert": {"id", "rule", "rule_id", "kind", "subject", "value", "threshold", "started", "fired_at",
               "resolved_at", "resolved_by", "summary"}}
"""

from __future__ import annotations

import smtplib
from typing import Any

import urllib3
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from console.alerts.models import Alert, AlertRule, Notification
from console.alerts.webhook_guard import WebhookRefused, post_json

FIRING, REPEAT, RESOLVED = "firing", "repeat", "resolved"
UNITS = {AlertRule.GROUP_LAG_MESSAGES: "messages", AlertRule.GROUP_LAG_SECONDS: "s",
         AlertRule.DLQ_GROWTH: "dead letters", AlertRule.DISK_RATIO: "", AlertRule.BROKER_MISSING: "",
         AlertRule.REPLICATION_LAG_BYTES: "bytes", AlertRule.REPLICATION_LAG_SECONDS: "s"}


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def summary(alert: Alert) -> str:
    """One line saying what the alert is about, e.g. ``lag of orders/Orders is 120 messages (>= 100)``."""
    value, threshold, subject = alert.value, alert.threshold, alert.subject
    if alert.kind == AlertRule.BROKER_MISSING:
        return f"broker {subject} is not registered with the name server"
    if alert.kind == AlertRule.ELECTION:
        name, _, epoch = subject.partition(" masterEpoch ")
        return f"broker-set {name} elected a master (masterEpoch {epoch})"
    if alert.kind == AlertRule.DISK_RATIO:
        return f"disk use of broker {subject} is {value if value is None else f'{value:.1%}'} (>= {threshold:.1%})"
    what = {AlertRule.GROUP_LAG_MESSAGES: "lag", AlertRule.GROUP_LAG_SECONDS: "lag",
            AlertRule.DLQ_GROWTH: "DLQ growth", AlertRule.REPLICATION_LAG_BYTES: "replication lag of broker group",
            AlertRule.REPLICATION_LAG_SECONDS: "replication lag of broker group"}.get(alert.kind, alert.kind)
    shown = "unknown" if value is None else f"{value:g}"
    return f"{what} of {subject} is {shown} {UNITS.get(alert.kind, '')} (>= {threshold:g})".replace("  ", " ")


def payload(alert: Alert, event: str) -> dict[str, Any]:
    """The webhook body (see the module docstring)."""
    return {"event": event, "status": RESOLVED if event == RESOLVED else FIRING, "alert": {
        "id": alert.pk, "rule": alert.rule_name, "rule_id": alert.rule_id, "kind": alert.kind,
        "subject": alert.subject, "value": alert.value, "threshold": alert.threshold,
        "started": _iso(alert.started), "fired_at": _iso(alert.fired_at), "resolved_at": _iso(alert.resolved_at),
        "resolved_by": alert.resolved_by, "summary": summary(alert)}}


def _email(alert: Alert, event: str, addresses: list[str]) -> Notification:
    note = Notification(alert=alert, event=event, channel=Notification.EMAIL, target=", ".join(addresses),
                        sent_at=timezone.now())
    title = f"[{'RESOLVED' if event == RESOLVED else 'FIRING'}] {alert.rule_name}: {alert.subject}"
    body = (f"{summary(alert)}\n\nrule: {alert.rule_name} ({alert.kind})\nsubject: {alert.subject}\n"
            f"started: {_iso(alert.started)}\nresolved: {_iso(alert.resolved_at) or '-'}\n")
    try:
        send_mail(title, body, settings.DEFAULT_FROM_EMAIL, addresses, fail_silently=False)
        note.ok = True
    except (smtplib.SMTPException, OSError, ValueError) as exc:
        note.error = f"{type(exc).__name__}: {exc}"
    note.save()
    return note


def _webhook(alert: Alert, event: str, url: str) -> Notification:
    note = Notification(alert=alert, event=event, channel=Notification.WEBHOOK, target=url, sent_at=timezone.now())
    timeout = float(getattr(settings, "ALERTS_WEBHOOK_TIMEOUT_S", 5))
    try:
        status, text = post_json(url, payload(alert, event), timeout, "broker-core-console-alerts")
        note.status_code = status
        note.ok = 200 <= status < 300
        if 300 <= status < 400:
            note.error = f"HTTP {status}: redirects are not followed"
        elif not note.ok:
            note.error = f"HTTP {status}: {text}"
    except (WebhookRefused, OSError, urllib3.exceptions.HTTPError) as exc:
        note.error = f"{type(exc).__name__}: {exc}"[:2000]
    note.save()
    return note


def send(rule: AlertRule, alert: Alert, event: str) -> list[Notification]:
    """Tell every channel of ``rule`` about ``event`` of ``alert``; returns the recorded attempts."""
    notes = []
    if rule.emails:
        notes.append(_email(alert, event, list(rule.emails)))
    if rule.webhook_url:
        notes.append(_webhook(alert, event, rule.webhook_url))
    return notes
