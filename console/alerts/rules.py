"""What users do to alerts: create, update and delete rules, silence a rule for a while, resolve an alert by
hand. Each change is audited (``alert_rule.create`` / ``.update`` / ``.delete`` / ``.silence``,
``alert.resolve``) with before/after."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.alerts import services
from console.alerts.models import Alert, AlertRule
from console.alerts.selectors import RULE_FIELDS, alert_json, get_alert, get_rule, rule_json
from console.alerts.webhook_guard import validate_webhook_url
from console.errors import ApiError, bad_request
from console.services.audit import record

MAX_THRESHOLD = 1e15


def check_threshold(kind: str, threshold: float) -> str | None:
    """Why ``threshold`` does not fit ``kind`` (None when it does)."""
    if not math.isfinite(threshold) or threshold < 0 or threshold > MAX_THRESHOLD:
        return "threshold must be a finite number from 0"
    if kind == AlertRule.DISK_RATIO and not 0 < threshold <= 1:
        return "a disk_ratio threshold is a ratio in (0, 1], e.g. 0.85"
    if kind in (AlertRule.GROUP_LAG_MESSAGES, AlertRule.DLQ_GROWTH) and threshold < 1:
        return "a lag or DLQ growth threshold is at least 1 message"
    if kind in (AlertRule.GROUP_LAG_SECONDS, AlertRule.REPLICATION_LAG_SECONDS) and threshold <= 0:
        return "a lag threshold in seconds must be above 0"
    if kind == AlertRule.ELECTION and threshold > 1:
        return "an election rule counts each election once: its threshold is 0 or 1"
    if kind == AlertRule.REPLICATION_LAG_BYTES and threshold < 1:
        return "a replication lag threshold is at least 1 byte"
    return None


def _check_name(name: str, rule_id: int | None = None) -> None:
    if AlertRule.objects.filter(name=name).exclude(pk=rule_id).exists():
        raise ApiError(409, "rule_exists", f"an alert rule named {name!r} exists already")


def _check_webhook(data: dict[str, Any]) -> None:
    """Refuse a webhook URL aimed at a non-public address (the serializers and forms check it too)."""
    try:
        validate_webhook_url(data.get("webhook_url") or "")
    except ValidationError as exc:
        raise bad_request("webhook_refused", " ".join(exc.messages)) from None


def create_rule(user: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Create a rule from validated ``data`` (the fields of :data:`RULE_FIELDS`)."""
    _check_name(data["name"])
    _check_webhook(data)
    try:
        with transaction.atomic():
            rule = AlertRule.objects.create(**{f: data[f] for f in RULE_FIELDS if f in data})
    except IntegrityError:
        raise ApiError(409, "rule_exists", f"an alert rule named {data['name']!r} exists already") from None
    after = rule_json(rule)
    record(user, "alert_rule.create", rule.name, after=after)
    return after


def update_rule(user: Any, rule_id: int, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply validated ``changes``; a rule's open alerts keep their subject and are re-evaluated as they are."""
    rule = get_rule(rule_id)
    before = rule_json(rule)
    if "name" in changes:
        _check_name(changes["name"], rule.pk)
    _check_webhook(changes)
    for f in RULE_FIELDS:
        if f in changes:
            setattr(rule, f, changes[f])
    rule.save()
    after = rule_json(rule)
    record(user, "alert_rule.update", rule.name, before=before, after=after)
    return after


def delete_rule(user: Any, rule_id: int) -> None:
    """Delete a rule; its open alerts are resolved (without notifying) and its history kept."""
    rule = get_rule(rule_id)
    before = rule_json(rule)
    now = timezone.now()
    rule.alerts.filter(state=Alert.PENDING).delete()
    rule.alerts.filter(state=Alert.FIRING).update(state=Alert.RESOLVED, resolved_at=now, resolved_by="rule deleted")
    rule.delete()
    record(user, "alert_rule.delete", before["name"], before=before)


def silence_rule(user: Any, rule_id: int, minutes: int) -> dict[str, Any]:
    """Silence a rule for ``minutes`` from now (0 ends a silence): it keeps evaluating and recording alerts but
    sends nothing until then."""
    rule = get_rule(rule_id)
    before = {"silenced_until": rule_json(rule)["silenced_until"]}
    rule.silenced_until = timezone.now() + timedelta(minutes=minutes) if minutes else None
    rule.save(update_fields=["silenced_until", "updated"])
    after = rule_json(rule)
    record(user, "alert_rule.silence", rule.name, before=before,
           after={"silenced_until": after["silenced_until"], "minutes": minutes})
    return after


def resolve_alert(user: Any, alert_id: int) -> dict[str, Any]:
    """Resolve an open alert by hand (409 when it is resolved already). If its condition still holds, no new
    alert opens for the subject until the condition clears once."""
    alert = get_alert(alert_id)
    if alert.state == Alert.RESOLVED:
        raise ApiError(409, "already_resolved", f"alert {alert_id} was resolved at {alert.resolved_at.isoformat()}")
    before = alert_json(alert, with_notifications=False)
    services.close(alert, timezone.now(), by=user.get_username() or "user", held=True)
    after = alert_json(alert)
    record(user, "alert.resolve", f"{alert.rule_name}: {alert.subject}", before=before,
           after={k: v for k, v in after.items() if k != "notifications"})
    return after
