"""Alert evaluation: each enabled rule observes its subjects, then opens, fires, repeats or resolves alerts.

What a rule observes (a value per subject; the condition holds when ``value >= threshold``):

| kind                 | subject        | value                                                                 |
|----------------------|----------------|-----------------------------------------------------------------------|
| `group_lag_messages` | `group/topic`  | ``LagSample.lag`` of the latest raw sampling                          |
| `group_lag_seconds`  | `group/topic`  | ``LagSample.lag_seconds`` of the latest sampling (null: unknown)      |
| `dlq_growth`         | `group`        | DLQ size now minus the oldest sampled size within ``window_minutes``  |
| `disk_ratio`         | broker         | the newest of the last ``disk_check`` run's ratio and ``BrokerSample`` |
| `broker_missing`     | broker         | 1 when the name server has no master of the broker, else 0            |
| `replication_lag_bytes` | broker   | the worst slave's lag in bytes of the broker group (read now)         |
| `replication_lag_seconds` | broker | the worst slave's time behind (read now)                              |
| `election`           | `broker masterEpoch N` | 1 for each election recorded in the last ``window_minutes``   |

``target`` picks subjects by group (lag, DLQ) or broker name, as a shell-style glob (``*`` = all). A
``broker_missing`` rule on ``*`` expects every broker that ran a job or was sampled in the last day.

State changes per (rule, subject), one evaluation at a time (the task holds a lock):

1. The condition holds: a ``pending`` alert counts consecutive breaches; at ``for_evaluations`` it becomes
   ``firing`` and notifies once. While firing it notifies again only every ``repeat_minutes`` (0: never).
2. The condition clears: a pending alert is deleted (it never fired); a firing one is ``resolved`` and notifies.
   A subject no longer observed (the group is gone from the latest sampling) clears too.
3. Unknown values (no fresh samples, a null ``lag_seconds``) change nothing.
4. A silenced rule (``silenced_until`` in the future) still opens, fires and resolves alerts, but sends
   nothing; a firing alert that was never notified is notified once the silence ends, and its resolution is
   only sent if its firing was.
5. An alert resolved by hand while its condition still held is ``held``: no new alert for that subject until
   the condition clears once. Alerts of a disabled rule are resolved without notifying.

Sampled data older than :data:`STALE_AFTER` counts as unknown. A name server that cannot be reached makes a
``broker_missing`` rule's evaluation an error (reported, state unchanged), never a "missing". The replication
kinds read the brokers when evaluated (no sampled history): a group without slaves or HA connections is not a
subject; a group whose master does not answer, or whose slaves' lag is not known, is unknown. An ``election``
rule sees each election (:class:`console.monitoring.models.Election`, recorded by the controller sampler or a
switch-over) as its own subject, so every election fires once and resolves when it leaves the window.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max
from django.utils import timezone

from broker_core.client import ClientError
from console import broker_client
from console.alerts import notifications
from console.alerts.models import Alert, AlertRule
from console.monitoring.models import RAW_BUCKET, BrokerSample, Election, JobRun, LagSample
from console.selectors.replication import broker_groups

STALE_AFTER = timedelta(minutes=10)
BATCH_SPREAD = timedelta(seconds=30)  # samples this close to the newest one belong to the same sampling
SEEN_BROKERS_WITHIN = timedelta(days=1)
DISK_CHECK_JOB = "disk_check"  # workers.services.DISK_CHECK (the console does not import workers)

Observed = dict[str, float | None]


@dataclass
class EvaluationReport:
    """What one evaluation did (a task records it as the run's counts)."""

    rules: int = 0
    fired: int = 0
    repeated: int = 0
    resolved: int = 0
    pending: int = 0
    firing: int = 0
    notifications: int = 0
    notification_failures: int = 0
    errors: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        return {"rules": self.rules, "fired": self.fired, "repeated": self.repeated, "resolved": self.resolved,
                "pending": self.pending, "firing": self.firing, "notifications": self.notifications,
                "notification_failures": self.notification_failures}


def matches(target: str, name: str) -> bool:
    """Whether ``name`` is picked by a rule's ``target`` (exact name or shell-style glob; ``*`` = all)."""
    return target in ("", "*") or fnmatch.fnmatchcase(name, target)


# ---------------------------------------------------------------------------------------------- observations
def _latest_lag_rows(now: datetime) -> list[LagSample] | None:
    """The newest raw sampling's rows (latest per group and topic), or None when there is none that is fresh."""
    raw = LagSample.objects.filter(bucket_seconds=RAW_BUCKET)
    newest = raw.aggregate(t=Max("timestamp"))["t"]
    if newest is None or now - newest > STALE_AFTER:
        return None
    latest: dict[tuple[str, str], LagSample] = {}
    for row in raw.filter(timestamp__gte=newest - BATCH_SPREAD).order_by("timestamp", "id"):
        latest[(row.group, row.topic)] = row
    return list(latest.values())


def _observe_lag(rule: AlertRule, now: datetime) -> Observed | None:
    rows = _latest_lag_rows(now)
    if rows is None:
        return None
    seconds = rule.kind == AlertRule.GROUP_LAG_SECONDS
    return {f"{r.group}/{r.topic}": (r.lag_seconds if seconds else float(r.lag))
            for r in rows if matches(rule.target, r.group)}


def _observe_dlq_growth(rule: AlertRule, now: datetime) -> Observed | None:
    rows = _latest_lag_rows(now)
    if rows is None:
        return None
    newest = max(r.timestamp for r in rows) if rows else now
    groups = sorted({r.group for r in rows if matches(rule.target, r.group)})
    since = newest - timedelta(minutes=rule.window_minutes)
    out: Observed = {}
    for group in groups:
        by_time: dict[datetime, int] = {}
        for ts, size in (LagSample.objects.filter(group=group, bucket_seconds=RAW_BUCKET, timestamp__gte=since,
                                                  timestamp__lte=newest).values_list("timestamp", "dlq_size")):
            by_time[ts] = max(by_time.get(ts, 0), size)  # the DLQ size is per group, repeated on each topic row
        if by_time:
            times = sorted(by_time)
            out[group] = float(by_time[times[-1]] - by_time[times[0]])
    return out


def _observe_disk(rule: AlertRule, now: datetime) -> Observed | None:
    since = now - STALE_AFTER
    readings: dict[str, tuple[datetime, float | None]] = {}

    def offer(broker: str, when: datetime, ratio: Any) -> None:
        if not broker or not matches(rule.target, broker):
            return
        value = float(ratio) if isinstance(ratio, int | float) and ratio >= 0 else None
        if broker not in readings or when > readings[broker][0]:
            readings[broker] = (when, value)

    for broker, when, counts in (JobRun.objects.filter(job=DISK_CHECK_JOB, started__gte=since)
                                 .order_by("broker", "-started").values_list("broker", "started", "counts")):
        if broker not in readings and isinstance(counts, dict) and "disk_ratio" in counts:
            offer(broker, when, counts["disk_ratio"])
    for broker, when, ratio in (BrokerSample.objects.filter(timestamp__gte=since, disk_ratio__isnull=False)
                                .order_by("-timestamp").values_list("broker", "timestamp", "disk_ratio")):
        offer(broker, when, ratio)
    return {broker: value for broker, (_, value) in readings.items()}


def registered_brokers() -> set[str]:
    """Broker names with a master address at the name server (raises ConnectionError/TimeoutError/ClientError)."""
    table = broker_client.admin().cluster_info().get("brokerAddrTable", {})
    return {name for name, data in table.items() if "0" in data.get("brokerAddrs", {})}


def _observe_missing(rule: AlertRule, now: datetime) -> Observed:
    registered = registered_brokers()
    if any(ch in rule.target for ch in "*?[") or not rule.target:
        since = now - SEEN_BROKERS_WITHIN
        seen = set(JobRun.objects.filter(started__gte=since).exclude(broker="").values_list("broker", flat=True))
        seen |= set(BrokerSample.objects.filter(timestamp__gte=since).values_list("broker", flat=True))
        expected = {b for b in seen | registered if matches(rule.target, b)}
    else:
        expected = {rule.target}
    return {b: (0.0 if b in registered else 1.0) for b in sorted(expected)}


def _observe_replication(rule: AlertRule, now: datetime) -> Observed:
    key = "worst_lag_seconds" if rule.kind == AlertRule.REPLICATION_LAG_SECONDS else "worst_lag_bytes"
    out: Observed = {}
    for g in broker_groups():
        if matches(rule.target, g["name"]) and (g["slaves"] or g["connections"]):
            value = g[key] if g["master"]["up"] else None
            out[g["name"]] = None if value is None else float(value)
    return out


def _observe_election(rule: AlertRule, now: datetime) -> Observed:
    since = now - timedelta(minutes=rule.window_minutes)
    return {f"{e.broker_name} masterEpoch {e.master_epoch}": 1.0
            for e in Election.objects.filter(detected_at__gte=since) if matches(rule.target, e.broker_name)}


OBSERVERS = {AlertRule.GROUP_LAG_MESSAGES: _observe_lag, AlertRule.GROUP_LAG_SECONDS: _observe_lag,
             AlertRule.DLQ_GROWTH: _observe_dlq_growth, AlertRule.DISK_RATIO: _observe_disk,
             AlertRule.BROKER_MISSING: _observe_missing, AlertRule.REPLICATION_LAG_BYTES: _observe_replication,
             AlertRule.REPLICATION_LAG_SECONDS: _observe_replication, AlertRule.ELECTION: _observe_election}


def observe(rule: AlertRule, now: datetime | None = None) -> Observed | None:
    """``{subject: value}`` for ``rule`` now (None: no fresh data, nothing can be said)."""
    return OBSERVERS[rule.kind](rule, now or timezone.now())


def holds(rule: AlertRule, value: float) -> bool:
    if rule.kind == AlertRule.BROKER_MISSING:
        return value >= 1
    return value >= rule.threshold


# ---------------------------------------------------------------------------------------------- state changes
def is_silenced(rule: AlertRule | None, now: datetime) -> bool:
    return rule is not None and rule.silenced_until is not None and rule.silenced_until > now


def _notify(rule: AlertRule, alert: Alert, event: str, now: datetime, report: EvaluationReport) -> None:
    if is_silenced(rule, now):
        return
    notes = notifications.send(rule, alert, event)
    report.notifications += len(notes)
    report.notification_failures += sum(1 for n in notes if not n.ok)
    if notes and event != notifications.RESOLVED:  # a rule without channels keeps history only
        alert.last_notified_at = now
        alert.save(update_fields=["last_notified_at"])


def _fire_or_repeat(rule: AlertRule, alert: Alert, now: datetime, report: EvaluationReport) -> None:
    if alert.state == Alert.PENDING and alert.breaches >= rule.for_evaluations:
        alert.state, alert.fired_at = Alert.FIRING, now
        alert.save(update_fields=["state", "fired_at"])
        report.fired += 1
        _notify(rule, alert, notifications.FIRING, now, report)
    elif alert.state == Alert.FIRING and not is_silenced(rule, now):
        if alert.last_notified_at is None:  # fired while silenced: tell once the silence is over
            _notify(rule, alert, notifications.FIRING, now, report)
        elif rule.repeat_minutes and now - alert.last_notified_at >= timedelta(minutes=rule.repeat_minutes):
            report.repeated += 1
            _notify(rule, alert, notifications.REPEAT, now, report)


def close(alert: Alert, now: datetime, by: str = "", *, held: bool = False,
          report: EvaluationReport | None = None) -> None:
    """Resolve ``alert`` and send the resolution to the channels its firing was sent to (none when the rule is
    gone, disabled or silenced, or the firing was never sent). A pending alert that clears is deleted (it never
    fired); ``held`` (resolved by hand) keeps it, resolved."""
    report = report if report is not None else EvaluationReport()
    if alert.state == Alert.PENDING and not held:
        alert.delete()
        return
    alert.state, alert.resolved_at, alert.resolved_by, alert.held = Alert.RESOLVED, now, by, held
    alert.save(update_fields=["state", "resolved_at", "resolved_by", "held"])
    report.resolved += 1
    if alert.rule is not None and alert.last_notified_at is not None and alert.rule.enabled:
        _notify(alert.rule, alert, notifications.RESOLVED, now, report)


def _release(alert: Alert | None) -> None:
    """A held subject's condition cleared: the next breach opens a new alert."""
    if alert is not None:
        alert.held = False
        alert.save(update_fields=["held"])


def apply(rule: AlertRule, observed: Observed, now: datetime, report: EvaluationReport) -> None:
    """Move ``rule``'s alerts to what ``observed`` says (see the module docstring)."""
    open_alerts = {a.subject: a for a in rule.alerts.filter(state__in=Alert.OPEN)}
    held = {a.subject: a for a in rule.alerts.filter(state=Alert.RESOLVED, held=True)}
    for subject, value in observed.items():
        if value is None:
            continue
        alert = open_alerts.pop(subject, None)
        if not holds(rule, value):
            _release(held.pop(subject, None))
            if alert is not None:
                alert.value, alert.last_evaluated = value, now
                alert.save(update_fields=["value", "last_evaluated"])
                close(alert, now, report=report)
            continue
        if subject in held:
            continue
        if alert is None:
            alert = Alert.objects.create(rule=rule, rule_name=rule.name, kind=rule.kind, subject=subject,
                                         threshold=rule.threshold, started=now)
        alert.value, alert.last_evaluated, alert.breaches = value, now, alert.breaches + 1
        alert.save(update_fields=["value", "last_evaluated", "breaches"])
        _fire_or_repeat(rule, alert, now, report)
    for alert in open_alerts.values():  # subjects no longer observed
        if observed.get(alert.subject, 0.0) is not None:
            close(alert, now, report=report)
    for subject, h in held.items():
        if subject not in observed:
            _release(h)


def evaluate(now: datetime | None = None, rules: Iterable[AlertRule] | None = None) -> EvaluationReport:
    """Evaluate every enabled rule (or ``rules``) once. A rule whose data cannot be read (name server down)
    is reported in ``errors`` and left as it was; notification failures are recorded, never raised."""
    now = now or timezone.now()
    report = EvaluationReport()
    for alert in Alert.objects.filter(state__in=Alert.OPEN, rule__enabled=False).select_related("rule"):
        close(alert, now, by="rule disabled", report=report)
    for rule in (rules if rules is not None else AlertRule.objects.filter(enabled=True)):
        report.rules += 1
        try:
            observed = observe(rule, now)
        except (ConnectionError, TimeoutError, ClientError) as exc:
            report.errors.append(f"{rule.name}: {type(exc).__name__}: {exc}")
            continue
        if observed is not None:
            apply(rule, observed, now, report)
    report.pending = Alert.objects.filter(state=Alert.PENDING).count()
    report.firing = Alert.objects.filter(state=Alert.FIRING).count()
    return report
