"""Records of the scheduled jobs and the sampled history.

- :class:`JobRun`: one run of a scheduled job on a broker (written by ``workers``; read by the jobs page).
- :class:`LagSample`: a consumer group's lag on a topic at one moment, in messages and in time.
- :class:`TopicSample`: a topic's put/get rates at one moment (summed over brokers).
- :class:`BrokerSample`: a broker's disk use and put/get rates at one moment.
- :class:`ControllerSnapshot`: a broker-set as the controller saw it (master, epochs, SyncStateSet), written when
  it changed; :class:`Election`: a master change seen there (masterEpoch rose), or a switch-over from the console.

Samples carry ``bucket_seconds``: 60 for raw per-minute samples; the downsampling job replaces old raw
samples by one averaged row per hour (3600) so history stays cheap to keep and to chart.
"""

from __future__ import annotations

from django.db import models

RAW_BUCKET = 60
HOUR_BUCKET = 3600


class JobRun(models.Model):
    """One run of a scheduled job (``retention``, ``disk_check``, ``deliver_delayed``, ``sample_lag``,
    ``prune``, ...) on one broker (empty for cluster-wide jobs)."""

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
    """Lag of one consumer group on one topic at one moment (summed over brokers and queues): in messages,
    and in time (``lag_seconds``: age of the oldest unconsumed message; null when unknown), with the size
    of the group's dead-letter queue at that moment."""

    timestamp = models.DateTimeField(db_index=True)
    group = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    lag = models.BigIntegerField(default=0)
    lag_seconds = models.FloatField(null=True, blank=True)
    dlq_size = models.BigIntegerField(default=0)
    bucket_seconds = models.PositiveIntegerField(default=RAW_BUCKET)

    class Meta:
        ordering = ["-timestamp", "group", "topic"]
        indexes = [models.Index(fields=["group", "topic", "-timestamp"])]

    def __str__(self) -> str:
        return f"{self.group}/{self.topic} lag={self.lag} at {self.timestamp:%Y-%m-%d %H:%M:%S}"


class TopicSample(models.Model):
    """Put and get rates (messages per second since the previous sample) of one topic, over all brokers,
    with its message count (max - min offset summed over queues)."""

    timestamp = models.DateTimeField(db_index=True)
    topic = models.CharField(max_length=255)
    put_tps = models.FloatField(default=0)
    get_tps = models.FloatField(default=0)
    messages = models.BigIntegerField(default=0)
    # the counters the rates come from: sum of the queues' max offsets (appended) and of the known groups'
    # committed offsets (consumed); null on rows written before the counters were kept
    put_total = models.BigIntegerField(null=True, blank=True)
    get_total = models.BigIntegerField(null=True, blank=True)
    bucket_seconds = models.PositiveIntegerField(default=RAW_BUCKET)

    class Meta:
        ordering = ["-timestamp", "topic"]
        indexes = [models.Index(fields=["topic", "-timestamp"])]

    def __str__(self) -> str:
        return f"{self.topic} put={self.put_tps:.1f}/s get={self.get_tps:.1f}/s at {self.timestamp:%H:%M:%S}"


class BrokerSample(models.Model):
    """One broker at one moment: store disk use (ratio 0..1 from the disk check, and the CommitLog's bytes)
    and put/get rates."""

    timestamp = models.DateTimeField(db_index=True)
    broker = models.CharField(max_length=255)
    disk_ratio = models.FloatField(null=True, blank=True)
    disk_used_bytes = models.BigIntegerField(null=True, blank=True)
    put_tps = models.FloatField(default=0)
    get_tps = models.FloatField(default=0)
    # the broker's put/get counters since it started (runtime info), which the rates are computed from
    put_total = models.BigIntegerField(null=True, blank=True)
    get_total = models.BigIntegerField(null=True, blank=True)
    bucket_seconds = models.PositiveIntegerField(default=RAW_BUCKET)

    class Meta:
        ordering = ["-timestamp", "broker"]
        indexes = [models.Index(fields=["broker", "-timestamp"])]

    def __str__(self) -> str:
        return f"{self.broker} disk={self.disk_ratio} at {self.timestamp:%H:%M:%S}"


class ControllerSnapshot(models.Model):
    """A broker-set in RocketMQ 5 controller mode as CONTROLLER_GET_SYNC_STATE_DATA (1006) gave it, kept when
    the master, an epoch, the SyncStateSet or a replica's liveness differ from the set's previous snapshot."""

    timestamp = models.DateTimeField(db_index=True)
    broker_name = models.CharField(max_length=255)
    master_broker_id = models.BigIntegerField(null=True, blank=True)  # a controller id; null: no master
    master_address = models.CharField(max_length=255, blank=True, default="")
    master_epoch = models.IntegerField(default=0)
    sync_state_set_epoch = models.IntegerField(default=0)
    # [{"broker_id", "address", "alive"}]
    in_sync = models.JSONField(default=list, blank=True)
    not_in_sync = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-timestamp", "-id"]
        indexes = [models.Index(fields=["broker_name", "-timestamp"])]

    def __str__(self) -> str:
        return f"{self.broker_name} master {self.master_broker_id} epoch {self.master_epoch}"


class Election(models.Model):
    """A master change of a broker-set: the controller's masterEpoch rose between two samples (``observed``),
    or an operator's switch-over went through (``switch-over``). ``new_master_broker_id`` null: the old master
    is gone and nothing was electable."""

    OBSERVED, SWITCH_OVER = "observed", "switch-over"
    SOURCES = [(OBSERVED, "observed"), (SWITCH_OVER, "switch-over")]

    detected_at = models.DateTimeField(db_index=True)
    broker_name = models.CharField(max_length=255)
    master_epoch = models.IntegerField()
    old_master_broker_id = models.BigIntegerField(null=True, blank=True)
    new_master_broker_id = models.BigIntegerField(null=True, blank=True)
    new_master_address = models.CharField(max_length=255, blank=True, default="")
    source = models.CharField(max_length=12, choices=SOURCES, default=OBSERVED)
    by = models.CharField(max_length=150, blank=True, default="")  # the user of a switch-over

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["broker_name", "master_epoch"], name="election_once")]

    def __str__(self) -> str:
        return (f"{self.broker_name} epoch {self.master_epoch}: "
                f"{self.old_master_broker_id} -> {self.new_master_broker_id}")
