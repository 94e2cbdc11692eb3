"""A consumer group's lag per topic, in messages and in time, read from the brokers through the SDK.

Lag in messages is the broker's own figure (max offset minus the committed offset, per queue). Lag in time is
the age of the oldest unconsumed message: for every queue with a lag, the browsing
:class:`~broker_core.client.PullConsumer` (which never commits) reads one message at the group's committed
offset (the queue's min offset when the group never committed or the offset was cleaned away) and takes its
store timestamp; the topic's ``lag_seconds`` is ``now`` minus the oldest of those. A queue without lag adds 0,
so a caught-up group has ``lag_seconds == 0``; ``None`` means lagging queues exist but none could be read.

Used by the sampling job (``workers``) and by alert rules; one ``consume_stats`` call per group plus one pull
per lagging queue.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from broker_core.client import ClientError, MessageQueue
from console import broker_client


@dataclass(frozen=True)
class TopicLag:
    """``group``'s lag on ``topic`` summed over brokers and queues, and ``consumed``: the sum of its committed
    offsets (a counter: its growth between two samples is what the group consumed)."""

    group: str
    topic: str
    lag: int
    lag_seconds: float | None
    consumed: int


def oldest_unconsumed_ms(row: dict[str, Any]) -> int | None:
    """Store timestamp (ms) of the first message a consume-stats ``row`` has not consumed, or None when the
    queue has no lag or the message cannot be read."""
    if int(row.get("lag", 0)) <= 0:
        return None
    committed, low = int(row.get("consumerOffset", -1)), int(row.get("minOffset", 0))
    offset = max(committed, low)
    mq = MessageQueue(str(row["topic"]), str(row["brokerName"]), int(row["queueId"]))
    try:
        result = broker_client.browser().pull(mq, offset, max_nums=1)
    except ClientError:
        return None
    if not result.messages and result.next_begin_offset != offset:  # offset moved (cleaned): read from there
        try:
            result = broker_client.browser().pull(mq, result.next_begin_offset, max_nums=1)
        except ClientError:
            return None
    return int(result.messages[0].store_timestamp) if result.messages else None


def lag_from_rows(group: str, rows: list[dict[str, Any]], now_ms: int | None = None) -> list[TopicLag]:
    """Fold consume-stats rows of ``group`` into one :class:`TopicLag` per topic (sorted by topic)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_topic.setdefault(str(row["topic"]), []).append(row)
    out = []
    for topic, queue_rows in sorted(by_topic.items()):
        lag = sum(max(0, int(r.get("lag", 0))) for r in queue_rows)
        consumed = sum(max(0, int(r.get("consumerOffset", -1))) for r in queue_rows)
        lag_seconds: float | None = 0.0
        if lag:
            stamps = [s for s in (oldest_unconsumed_ms(r) for r in queue_rows) if s is not None]
            lag_seconds = max(0.0, (now_ms - min(stamps)) / 1000.0) if stamps else None
        out.append(TopicLag(group, topic, lag, lag_seconds, consumed))
    return out


def group_lag(group: str, topic: str | None = None) -> list[TopicLag]:
    """``group``'s lag per topic it has committed offsets on (or on ``topic`` only)."""
    rows = broker_client.admin().consume_stats(group, topic)["offsetTable"]
    return lag_from_rows(group, rows)
