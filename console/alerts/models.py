"""Alert rules, the alerts they open, and the notifications sent for them.

- :class:`AlertRule`: what to watch (``kind``), on what (``target``: a group, a broker, a glob, or ``*``), the
  threshold, how many consecutive evaluations the condition must hold before it fires (``for_evaluations``),
  where to send (``emails``, ``webhook_url``), an optional repeat interval, ``enabled`` and ``silenced_until``.
- :class:`Alert`: one (rule, subject) episode. ``pending`` while the condition holds for fewer evaluations than
  the rule asks (deleted if it clears before firing), ``firing`` once it fired, ``resolved`` when it cleared or
  someone resolved it by hand. A hand-resolved alert whose condition still held is ``held``: no new alert opens
  for that subject until the condition clears once.
- :class:`Notification`: one attempt to tell a channel about an alert event (firing / repeat / resolved), with
  the outcome (HTTP status, error text).

Rules keep their alerts' history after deletion: an alert copies the rule's name and kind, and its ``rule``
becomes null.
"""

from __future__ import annotations

from django.db import models


class AlertRule(models.Model):
    GROUP_LAG_MESSAGES = "group_lag_messages"
    GROUP_LAG_SECONDS = "group_lag_seconds"
    DLQ_GROWTH = "dlq_growth"
    DISK_RATIO = "disk_ratio"
    BROKER_MISSING = "broker_missing"
    REPLICATION_LAG_BYTES = "replication_lag_bytes"
    REPLICATION_LAG_SECONDS = "replication_lag_seconds"
    ELECTION = "election"
    KINDS = [
        (GROUP_LAG_MESSAGES, "group lag (messages)"),
        (GROUP_LAG_SECONDS, "group lag (seconds behind)"),
        (DLQ_GROWTH, "DLQ growth (messages over the window)"),
        (DISK_RATIO, "broker disk use (ratio 0..1)"),
        (BROKER_MISSING, "broker missing from the name server"),
        (REPLICATION_LAG_BYTES, "replication lag of a broker group's worst slave (bytes)"),
        (REPLICATION_LAG_SECONDS, "replication lag of a broker group's worst slave (seconds behind)"),
        (ELECTION, "a broker-set's master changed (controller mode: every election fires once)"),
    ]
    GROUP_KINDS = (GROUP_LAG_MESSAGES, GROUP_LAG_SECONDS, DLQ_GROWTH)
    BROKER_KINDS = (DISK_RATIO, BROKER_MISSING, REPLICATION_LAG_BYTES, REPLICATION_LAG_SECONDS, ELECTION)

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=32, choices=KINDS)
    # a consumer group (lag, DLQ kinds) or broker name (disk, broker, replication kinds); shell-style globs;
    # "*" = all
    target = models.CharField(max_length=255, default="*")
    threshold = models.FloatField(default=0)
    for_evaluations = models.PositiveSmallIntegerField(default=1)
    window_minutes = models.PositiveIntegerField(default=10)  # dlq_growth: compare with a sample this old
    emails = models.JSONField(default=list, blank=True)
    webhook_url = models.URLField(max_length=1000, blank=True, default="")
    repeat_minutes = models.PositiveIntegerField(default=0)  # 0: one firing and one resolved notification
    enabled = models.BooleanField(default=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind} {self.target} >= {self.threshold})"


class Alert(models.Model):
    PENDING, FIRING, RESOLVED = "pending", "firing", "resolved"
    STATES = [(PENDING, "pending"), (FIRING, "firing"), (RESOLVED, "resolved")]
    OPEN = (PENDING, FIRING)

    rule = models.ForeignKey(AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")
    rule_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=32)
    subject = models.CharField(max_length=600)  # "group/topic", "group" or a broker name
    state = models.CharField(max_length=8, choices=STATES, default=PENDING)
    value = models.FloatField(null=True, blank=True)  # the latest observed value
    threshold = models.FloatField(default=0)
    breaches = models.PositiveIntegerField(default=0)  # consecutive evaluations the condition held
    started = models.DateTimeField()
    fired_at = models.DateTimeField(null=True, blank=True)
    last_evaluated = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, default="")  # "" = the condition cleared
    held = models.BooleanField(default=False)
    last_notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started", "-id"]
        indexes = [models.Index(fields=["state", "-started"]), models.Index(fields=["rule", "subject", "state"])]

    def __str__(self) -> str:
        return f"{self.rule_name} {self.subject} {self.state}"


class Notification(models.Model):
    EMAIL, WEBHOOK = "email", "webhook"
    CHANNELS = [(EMAIL, "email"), (WEBHOOK, "webhook")]

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=10)  # firing, repeat, resolved
    channel = models.CharField(max_length=8, choices=CHANNELS)
    target = models.CharField(max_length=1000)  # the addresses or the URL
    sent_at = models.DateTimeField()
    ok = models.BooleanField(default=False)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-sent_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} via {self.channel} {'ok' if self.ok else 'failed'}"
