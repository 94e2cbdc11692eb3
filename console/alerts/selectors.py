"""Reads of alert rules, alerts and notifications, as the API and the pages show them.

Webhook URLs often carry a secret (a Slack or PagerDuty key in the path), so only those who may edit rules
(operators and admins, :func:`can_see_webhooks`) see them: with ``show_webhook=False`` a rule's ``webhook_url`` and
a webhook notification's ``target`` are None, and ``has_webhook`` says whether there is one.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from console.alerts.models import Alert, AlertRule, Notification
from console.alerts.notifications import summary
from console.errors import not_found
from console.roles import OPERATOR, has_role

RULE_FIELDS = ("name", "kind", "target", "threshold", "for_evaluations", "window_minutes", "emails", "webhook_url",
               "repeat_minutes", "enabled")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def can_see_webhooks(user: Any) -> bool:
    """Whether ``user`` may see webhook URLs (operators and admins; viewers may not)."""
    return has_role(user, OPERATOR)


def rule_json(rule: AlertRule, show_webhook: bool = True) -> dict[str, Any]:
    silenced = rule.silenced_until is not None and rule.silenced_until > timezone.now()
    fields = {f: getattr(rule, f) for f in RULE_FIELDS}
    if not show_webhook:
        fields["webhook_url"] = None
    return {"id": rule.pk, **fields, "has_webhook": bool(rule.webhook_url),
            "silenced_until": _iso(rule.silenced_until) if silenced else None, "silenced": silenced,
            "firing": rule.alerts.filter(state=Alert.FIRING).count(),
            "created": _iso(rule.created), "updated": _iso(rule.updated)}


def notification_json(note: Notification, show_webhook: bool = True) -> dict[str, Any]:
    shown = show_webhook or note.channel != Notification.WEBHOOK
    error = note.error if shown or not note.error else "delivery failed"  # errors may quote the URL
    return {"event": note.event, "channel": note.channel, "target": note.target if shown else None,
            "sent_at": _iso(note.sent_at), "ok": note.ok, "status_code": note.status_code, "error": error}


def alert_json(alert: Alert, with_notifications: bool = True, show_webhook: bool = True) -> dict[str, Any]:
    out = {"id": alert.pk, "rule_id": alert.rule_id, "rule": alert.rule_name, "kind": alert.kind,
           "subject": alert.subject, "state": alert.state, "value": alert.value, "threshold": alert.threshold,
           "breaches": alert.breaches, "summary": summary(alert), "started": _iso(alert.started),
           "fired_at": _iso(alert.fired_at), "last_evaluated": _iso(alert.last_evaluated),
           "resolved_at": _iso(alert.resolved_at), "resolved_by": alert.resolved_by,
           "last_notified_at": _iso(alert.last_notified_at)}
    if with_notifications:
        out["notifications"] = [notification_json(n, show_webhook) for n in alert.notifications.all()]
    return out


MAX_ID = 2**63 - 1  # larger path ids cannot be database keys


def get_rule(rule_id: int) -> AlertRule:
    rule = AlertRule.objects.filter(pk=rule_id).first() if 0 < rule_id <= MAX_ID else None
    if rule is None:
        raise not_found(f"no alert rule {rule_id}")
    return rule


def get_alert(alert_id: int) -> Alert:
    alert = Alert.objects.select_related("rule").filter(pk=alert_id).first() if 0 < alert_id <= MAX_ID else None
    if alert is None:
        raise not_found(f"no alert {alert_id}")
    return alert


def list_rules(show_webhook: bool = True) -> list[dict[str, Any]]:
    return [rule_json(r, show_webhook) for r in AlertRule.objects.all()]


def alerts(state: str = "", rule_id: int | None = None, limit: int = 100) -> list[Alert]:
    """Alerts newest first, optionally by state (``pending``, ``firing``, ``resolved``) and rule."""
    rows = Alert.objects.select_related("rule").prefetch_related("notifications")
    if state:
        rows = rows.filter(state=state)
    if rule_id is not None:
        rows = rows.filter(rule_id=rule_id)
    return list(rows[:limit])


def list_alerts(state: str = "", rule_id: int | None = None, limit: int = 100,
                show_webhook: bool = True) -> list[dict[str, Any]]:
    return [alert_json(a, show_webhook=show_webhook) for a in alerts(state, rule_id, limit)]
