"""Records of the scheduled jobs: one :class:`JobRun` per run of a job on a broker, and the lag history
(:class:`LagSample`) the sampling job stores for the dashboard's charts."""

from __future__ import annotations

from django.db import models


class JobRun(models.Model):
    """One run of a scheduled job (``retention``, ``disk_check``, ``deliver_delayed``, ``sample_lag``,
    ``prune``) on one broker (empty for cluster-wide jobs)."""

    OK, FAILED, SKIPPED = "ok", "failed", "skipped"
    OUTCOMES = [(OK, "ok"), (FAILED, "failed"), (SKIPPED, "skipped")]

    job = models.CharField(max_length=64)
    broker = models.CharField(max_length=255, blank=True, default="")
    started = models.DateTimeField()
    finished = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=8, choices=OUTCOMES)
    # what the run did, e.g. files_deleted, bytes_freed, delivered, oldest_overdue_ms, disk ratio
    counts = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-started", "-id"]
        indexes = [models.Index(fields=["job", "broker", "-started"])]

    def __str__(self) -> str:
        return f"{self.job}@{self.broker or '*'} {self.outcome} {self.started:%Y-%m-%d %H:%M:%S}"


class LagSample(models.Model):
    """Lag of one consumer group on one topic at one moment (summed over brokers and queues), with the
    size of the group's dead-letter queue at that moment."""

    timestamp = models.DateTimeField(db_index=True)
    group = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    lag = models.BigIntegerField(default=0)
    dlq_size = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-timestamp", "group", "topic"]
        indexes = [models.Index(fields=["group", "topic", "-timestamp"])]

    def __str__(self) -> str:
        return f"{self.group}/{self.topic} lag={self.lag} at {self.timestamp:%Y-%m-%d %H:%M:%S}"
