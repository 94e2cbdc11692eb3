"""Sampling against real brokers (rates from counters between two samples, lag in messages and in seconds,
disk use) and downsampling of hand-made rows (exact hourly averages, pruning past the kept days)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from broker_core.client import AdminClient, Message, MessageQueue, Producer, PullConsumer
from console.models import AuditEvent
from console.monitoring import sampling
from console.monitoring.models import BrokerSample, LagSample, TopicSample
from console.selectors import lag as lag_selector
from tests.integration.cluster import Cluster, wait_until
from tests.workers.conftest import make_topic
from workers import services


def dispatched(admin: AdminClient, topic: str, count: int) -> None:
    """Wait until the broker has dispatched ``count`` messages of ``topic`` to its ConsumeQueues (sends return
    once the CommitLog holds them; the queue offsets samples count follow a moment later)."""
    wait_until(lambda: sum(r["maxOffset"] for r in admin.topic_stats(topic)) == count, timeout=30,
               what=f"dispatch of {count} messages of {topic}")

pytestmark = pytest.mark.integration


def _commit(cluster: Cluster, group: str, topic: str, offset: int) -> None:
    c = PullConsumer(group, cluster.namesrv).start()
    try:
        c.commit_offset(MessageQueue(topic, "broker-a", 0), offset)
    finally:
        c.shutdown()


def test_lag_in_seconds_is_the_age_of_the_first_unconsumed_message(cluster: Cluster, sdk_admin: AdminClient,
                                                                   producer: Producer,
                                                                   unique: Callable[[str], str]):
    topic, group = make_topic(sdk_admin, unique("Aging"), "broker-a"), unique("agers")
    sent = [producer.send(Message(topic, b"m%d" % i)) for i in range(3)]
    _commit(cluster, group, topic, 1)
    second = sdk_admin.view_message(sent[1].offset_msg_id)  # the first message the group has not consumed
    now_ms = second.store_timestamp + 42_500

    rows = sdk_admin.consume_stats(group, topic)["offsetTable"]
    [lag] = lag_selector.lag_from_rows(group, rows, now_ms=now_ms)

    assert (lag.topic, lag.lag, lag.consumed, lag.lag_seconds) == (topic, 2, 1, 42.5)
    _commit(cluster, group, topic, 3)
    [caught_up] = lag_selector.group_lag(group, topic)
    assert (caught_up.lag, caught_up.lag_seconds, caught_up.consumed) == (0, 0.0, 3)


def test_two_samples_give_put_and_get_rates_per_topic_and_broker_and_disk_use(cluster: Cluster,
                                                                              sdk_admin: AdminClient,
                                                                              producer: Producer,
                                                                              unique: Callable[[str], str]):
    topic, group = make_topic(sdk_admin, unique("Rated"), "broker-a"), unique("raters")
    producer.send(Message(topic, b"first"))
    dispatched(sdk_admin, topic, 1)
    _commit(cluster, group, topic, 0)
    AuditEvent.objects.create(action="group.reset_offset", target=f"{group}/{topic}", ok=True)  # a known group
    brokers = services.broker_addrs()
    t0 = timezone.now()
    first = sampling.sample_all(brokers, now=t0)
    assert first["broker_samples"] == 2 and first["topic_samples"] >= 1
    assert TopicSample.objects.get(topic=topic).put_tps == 0  # no previous counter yet

    for i in range(20):
        producer.send(Message(topic, b"m%d" % i))
    dispatched(sdk_admin, topic, 21)
    _commit(cluster, group, topic, 11)  # the group consumed 11 messages (offset 0 -> 11)
    sampling.sample_all(brokers, now=t0 + timedelta(seconds=10))

    latest = TopicSample.objects.filter(topic=topic).order_by("-timestamp").first()
    assert latest is not None
    assert (latest.put_tps, latest.get_tps, latest.messages, latest.put_total, latest.get_total) == (
        2.0, 1.1, 21, 21, 11)
    broker_a = BrokerSample.objects.filter(broker="broker-a").order_by("-timestamp").first()
    assert broker_a is not None and broker_a.put_tps >= 2.0  # the 20 sends, plus anything else put meanwhile
    assert broker_a.disk_ratio == pytest.approx(sdk_admin.check_disk(cluster.brokers["broker-a"].addr)["ratio"],
                                                abs=0.01)
    assert broker_a.disk_used_bytes and broker_a.disk_used_bytes > 0
    lag = LagSample.objects.filter(group=group, topic=topic).order_by("-timestamp").first()
    assert lag is not None and lag.lag == 10 and lag.lag_seconds is not None and lag.lag_seconds >= 0


def test_a_counter_that_went_down_counts_from_zero():
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert sampling.rate(150, (now - timedelta(seconds=60), 30), now) == 2.0
    assert sampling.rate(60, (now - timedelta(seconds=60), 500), now) == 1.0  # restarted broker
    assert sampling.rate(60, None, now) == 0.0


def _at(hour: int, minute: int) -> datetime:
    return datetime(2026, 1, 1, hour, minute, tzinfo=UTC)


def test_downsampling_replaces_old_raw_rows_by_exact_hourly_averages_and_prunes_past_the_kept_days(settings):  # type: ignore[no-untyped-def]
    settings.WORKERS_SAMPLE_RAW_HOURS = 24
    settings.WORKERS_LAG_SAMPLE_DAYS = 7
    now = datetime(2026, 1, 3, 10, 30, tzinfo=UTC)  # raw rows before 2026-01-02 10:00 are downsampled
    for minute, (lag, secs, dlq) in zip((0, 20, 40), ((10, 1.0, 0), (20, None, 3), (30, 5.0, 3)), strict=True):
        LagSample.objects.create(timestamp=_at(9, minute), group="g", topic="t", lag=lag, lag_seconds=secs,
                                 dlq_size=dlq)
    LagSample.objects.create(timestamp=_at(10, 5), group="g", topic="t", lag=7, lag_seconds=2.5)
    LagSample.objects.create(timestamp=_at(9, 30), group="g", topic="other", lag=4)
    for minute, (put, get, held, total) in zip((1, 31), ((1.5, 0.5, 100, 1000), (2.5, 1.0, 120, 1090)), strict=True):
        TopicSample.objects.create(timestamp=_at(9, minute), topic="t", put_tps=put, get_tps=get, messages=held,
                                   put_total=total, get_total=total - 100)
    for minute, ratio, used in ((2, 0.5, 1000), (32, 0.7, 2001)):
        BrokerSample.objects.create(timestamp=_at(9, minute), broker="b", disk_ratio=ratio, disk_used_bytes=used,
                                    put_tps=4.0, get_tps=2.0, put_total=10, get_total=5)
    recent = BrokerSample.objects.create(timestamp=datetime(2026, 1, 2, 10, 1, tzinfo=UTC), broker="b",
                                         disk_ratio=0.9)
    ancient = TopicSample.objects.create(timestamp=datetime(2025, 12, 26, 10, tzinfo=UTC), topic="t",
                                         bucket_seconds=3600)

    counts = sampling.downsample_and_prune(now=now)

    assert counts == {"samples_pruned": 1, "samples_downsampled": 9, "hourly_rows_written": 5}
    hourly = {(s.topic, s.timestamp): s for s in LagSample.objects.filter(bucket_seconds=3600)}
    g9 = hourly[("t", _at(9, 0))]
    assert (g9.lag, g9.lag_seconds, g9.dlq_size) == (20, 3.0, 2)  # (10+20+30)/3, (1+5)/2 (null left out), 6/3
    assert (hourly[("t", _at(10, 0))].lag, hourly[("t", _at(10, 0))].lag_seconds) == (7, 2.5)
    assert hourly[("other", _at(9, 0))].lag == 4 and hourly[("other", _at(9, 0))].lag_seconds is None
    [topic] = TopicSample.objects.filter(bucket_seconds=3600)
    assert (topic.timestamp, topic.put_tps, topic.get_tps, topic.messages, topic.put_total, topic.get_total) == (
        _at(9, 0), 2.0, 0.75, 110, 1090, 990)
    assert not TopicSample.objects.filter(pk=ancient.pk).exists()
    [broker] = BrokerSample.objects.filter(bucket_seconds=3600)
    assert (broker.disk_ratio, broker.disk_used_bytes, broker.put_tps, broker.put_total) == (0.6, 1500, 4.0, 10)
    assert list(BrokerSample.objects.filter(bucket_seconds=60)) == [recent]  # inside the raw window: kept
    assert LagSample.objects.filter(bucket_seconds=60).count() == 0

    assert sampling.downsample_and_prune(now=now) == {"samples_pruned": 0, "samples_downsampled": 0,
                                                      "hourly_rows_written": 0}
