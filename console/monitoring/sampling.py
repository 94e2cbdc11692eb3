"""Sampling (every minute) and downsampling (with the prune job) of the history the dashboard charts.

One sampling pass writes, at one timestamp:

- :class:`BrokerSample` per broker: disk ratio from the disk-check admin operation, the CommitLog's bytes
  (max - min offset) from the runtime info, and put/get rates from the broker's put/get counters
  (``putTotal`` / ``getTotal``) between this sample and the previous one;
- :class:`LagSample` per (known group, topic): lag in messages and in seconds
  (:mod:`console.selectors.lag`) and the group's DLQ size;
- :class:`TopicSample` per non-system topic: messages held (max - min offset), put rate from the sum of the
  queues' max offsets and get rate from the sum of the known groups' committed offsets on it, both between
  this sample and the previous one.

Rates: ``(counter - previous counter) / seconds between the samples``. The first sample of a key has no
previous counter and records 0; a counter that went down (a broker restarted, a topic re-created) counts
from zero: ``counter / seconds``.

Downsampling: raw rows (``bucket_seconds`` 60) older than ``WORKERS_SAMPLE_RAW_HOURS`` (default 24), floored
to a whole hour so every hour is complete, are replaced by one row per key and hour (``bucket_seconds``
3600, timestamp at the hour's start) holding the averages of the numeric fields (null values left out;
integer fields rounded half to even) and the last counter values. Samples older than
``WORKERS_LAG_SAMPLE_DAYS`` (default 7) are deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from broker_core.client import ClientError
from broker_core.protocol.validation import DLQ_GROUP_TOPIC_PREFIX, SYSTEM_TOPICS
from console import broker_client
from console.monitoring.models import HOUR_BUCKET, RAW_BUCKET, BrokerSample, LagSample, TopicSample
from console.selectors.groups import known_groups
from console.selectors.lag import group_lag

# model -> (key fields, averaged fields, integer averaged fields, counter fields kept as the last value)
SAMPLE_SHAPES: dict[type[models.Model], tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    LagSample: (("group", "topic"), ("lag", "lag_seconds", "dlq_size"), ("lag", "dlq_size"), ()),
    TopicSample: (("topic",), ("put_tps", "get_tps", "messages"), ("messages",), ("put_total", "get_total")),
    BrokerSample: (("broker",), ("disk_ratio", "disk_used_bytes", "put_tps", "get_tps"), ("disk_used_bytes",),
                   ("put_total", "get_total")),
}


def raw_hours() -> float:
    """How long raw (per-minute) samples are kept before downsampling (``WORKERS_SAMPLE_RAW_HOURS``)."""
    return float(getattr(settings, "WORKERS_SAMPLE_RAW_HOURS", 24))


def sample_days() -> float:
    """How long samples are kept at all (``WORKERS_LAG_SAMPLE_DAYS``, default 7)."""
    return float(getattr(settings, "WORKERS_LAG_SAMPLE_DAYS", 7))


def rate(current: int | None, previous: Any, now: datetime) -> float:
    """Per-second rate of a counter since ``previous`` (a sample row with ``timestamp`` and the counter, or
    None); see the module docstring."""
    if current is None or previous is None or previous[1] is None:
        return 0.0
    seconds = (now - previous[0]).total_seconds()
    if seconds <= 0:
        return 0.0
    delta = current - int(previous[1]) if current >= int(previous[1]) else current
    return round(delta / seconds, 3)


def _previous(model: type[models.Model], key: str, field: str) -> dict[str, tuple[datetime, int | None]]:
    """``{key value: (timestamp, counter)}`` of each key's newest raw row having a counter."""
    out: dict[str, tuple[datetime, int | None]] = {}
    rows = (model.objects.filter(bucket_seconds=RAW_BUCKET, **{f"{field}__isnull": False})
            .order_by(key, "-timestamp").values_list(key, "timestamp", field))
    for name, ts, value in rows:
        out.setdefault(name, (ts, value))
    return out


def sample_brokers(brokers: dict[str, str], now: datetime) -> list[BrokerSample]:
    """One :class:`BrokerSample` per reachable broker (an unreachable one is left out of this minute)."""
    admin = broker_client.admin()
    prev_put, prev_get = _previous(BrokerSample, "broker", "put_total"), _previous(BrokerSample, "broker", "get_total")
    out = []
    for name, addr in sorted(brokers.items()):
        try:
            runtime = admin.broker_runtime(addr)
            disk = admin.check_disk(addr)
        except (ConnectionError, TimeoutError, ClientError):
            continue
        put, get = int(runtime.get("putTotal", 0)), int(runtime.get("getTotal", 0))
        used = int(runtime.get("commit_log_max_offset", 0)) - int(runtime.get("commit_log_min_offset", 0))
        ratio = float(disk["ratio"])
        out.append(BrokerSample(timestamp=now, broker=name, disk_ratio=ratio if ratio >= 0 else None,
                                disk_used_bytes=max(0, used), put_total=put, get_total=get,
                                put_tps=rate(put, prev_put.get(name), now), get_tps=rate(get, prev_get.get(name), now)))
    return out


def sample_groups(now: datetime) -> tuple[list[LagSample], dict[str, int]]:
    """One :class:`LagSample` per (known group, topic), and ``{topic: sum of the groups' committed offsets}``."""
    topics = set(broker_client.admin().topic_list())
    samples: list[LagSample] = []
    consumed: dict[str, int] = {}
    for group in sorted(known_groups()):
        dlq = dlq_size(group, topics)
        for row in group_lag(group):
            samples.append(LagSample(timestamp=now, group=group, topic=row.topic, lag=row.lag,
                                     lag_seconds=row.lag_seconds, dlq_size=dlq))
            consumed[row.topic] = consumed.get(row.topic, 0) + row.consumed
    return samples, consumed


def dlq_size(group: str, topics: set[str]) -> int:
    """Messages held in ``%DLQ%<group>`` (0 when it does not exist)."""
    if DLQ_GROUP_TOPIC_PREFIX + group not in topics:
        return 0
    rows = broker_client.admin().topic_stats(DLQ_GROUP_TOPIC_PREFIX + group)
    return sum(int(r["maxOffset"]) - int(r["minOffset"]) for r in rows)


def sample_topics(consumed: dict[str, int], now: datetime) -> list[TopicSample]:
    """One :class:`TopicSample` per non-system topic (a topic that vanished meanwhile is left out)."""
    admin = broker_client.admin()
    prev_put, prev_get = _previous(TopicSample, "topic", "put_total"), _previous(TopicSample, "topic", "get_total")
    out = []
    for topic in sorted(set(admin.topic_list()) - SYSTEM_TOPICS):
        try:
            rows = admin.topic_stats(topic)
        except ClientError:
            continue
        put = sum(int(r["maxOffset"]) for r in rows)
        held = sum(int(r["maxOffset"]) - int(r["minOffset"]) for r in rows)
        get = consumed.get(topic)
        out.append(TopicSample(timestamp=now, topic=topic, messages=held, put_total=put, get_total=get,
                               put_tps=rate(put, prev_put.get(topic), now),
                               get_tps=rate(get, prev_get.get(topic), now)))
    return out


def sample_all(brokers: dict[str, str], now: datetime | None = None) -> dict[str, int]:
    """One sampling pass (see the module docstring); returns the counts of rows written."""
    now = now or timezone.now()
    broker_rows = sample_brokers(brokers, now)
    lag_rows, consumed = sample_groups(now)
    topic_rows = sample_topics(consumed, now)
    with transaction.atomic():
        BrokerSample.objects.bulk_create(broker_rows)
        LagSample.objects.bulk_create(lag_rows)
        TopicSample.objects.bulk_create(topic_rows)
    return {"groups": len({s.group for s in lag_rows}), "samples": len(lag_rows), "lag_samples": len(lag_rows),
            "topic_samples": len(topic_rows), "broker_samples": len(broker_rows)}


# ---------------------------------------------------------------------------------------------- history
def _avg(values: Iterable[Any], integer: bool) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    mean = sum(present) / len(present)
    return round(mean) if integer else mean


def downsample(model: type[models.Model], cutoff: datetime) -> tuple[int, int]:
    """Replace ``model``'s raw rows older than ``cutoff`` (floored to the hour) by hourly averages; returns
    (raw rows removed, hourly rows written)."""
    keys, averaged, integers, counters = SAMPLE_SHAPES[model]
    cutoff = cutoff.replace(minute=0, second=0, microsecond=0)
    raw = model.objects.filter(bucket_seconds__lt=HOUR_BUCKET, timestamp__lt=cutoff)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for row in raw.order_by("timestamp", "id").iterator():
        hour = row.timestamp.replace(minute=0, second=0, microsecond=0)
        groups.setdefault((*(getattr(row, k) for k in keys), hour), []).append(row)
    hourly = []
    for group_key, rows in groups.items():
        fields: dict[str, Any] = dict(zip(keys, group_key[:-1], strict=True))
        for name in averaged:
            value = _avg((getattr(r, name) for r in rows), name in integers)
            fields[name] = value if value is not None or model._meta.get_field(name).null else 0
        for name in counters:
            fields[name] = getattr(rows[-1], name)
        hourly.append(model(timestamp=group_key[-1], bucket_seconds=HOUR_BUCKET, **fields))
    with transaction.atomic():
        removed = raw.delete()[0]  # the same rows: new raw samples are stamped now, past the cutoff
        model.objects.bulk_create(hourly)
    return removed, len(hourly)


def downsample_and_prune(now: datetime | None = None) -> dict[str, int]:
    """Downsample every sample model and delete samples past :func:`sample_days`."""
    now = now or timezone.now()
    counts = {"samples_downsampled": 0, "hourly_rows_written": 0, "samples_pruned": 0}
    for model in SAMPLE_SHAPES:
        counts["samples_pruned"] += model.objects.filter(
            timestamp__lt=now - timedelta(days=sample_days())).delete()[0]
        removed, written = downsample(model, now - timedelta(hours=raw_hours()))
        counts["samples_downsampled"] += removed
        counts["hourly_rows_written"] += written
    return counts
