"""Latency fault tolerance (the seeds' table): a send that took >= 550 ms makes its broker unavailable for 30 s,
>= 1000 ms for 60 s, ... >= 15000 ms for 600 s; a failed send counts as 30000 ms. The producer skips unavailable
brokers while another is available (``select_one_queue``, RocketMQ's ``MQFaultStrategy.selectOneMessageQueue``)."""

from __future__ import annotations

import time
from bisect import bisect_right
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker_core.client.message import MessageQueue

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)


class LatencyFaultTolerance:
    def __init__(self) -> None:
        self.unavailable_until: dict[str, float] = {}

    def update(self, broker: str, latency_ms: float, now: float | None = None) -> None:
        """``now``: ``time.monotonic()`` when the caller has it."""
        if latency_ms < LATENCY_MAX[2]:  # no penalty: the broker is available from now on
            if now is None:
                now = time.monotonic()
            if self.unavailable_until.get(broker, 0.0) > now:  # (nothing to write when it already is)
                self.unavailable_until[broker] = now
            return
        i = bisect_right(LATENCY_MAX, latency_ms)  # the duration of the largest limit <= latency_ms, else 0
        duration = NOT_AVAILABLE_DURATION[i - 1] if i else 0
        self.unavailable_until[broker] = (time.monotonic() if now is None else now) + duration / 1000

    def available(self, broker: str) -> bool:
        return time.monotonic() >= self.unavailable_until.get(broker, 0.0)


def select_one_queue(queues: list[MessageQueue], start: int, last_broker: str | None,
                     fault: LatencyFaultTolerance | None) -> MessageQueue:
    """Round-robin from ``start`` over ``queues`` (not empty): the first queue whose broker is available and is
    not ``last_broker`` (the one that just failed, while the topic has another); if every broker is unavailable,
    any queue of another broker than ``last_broker``; else the queue at ``start``."""
    n = len(queues)
    for i in range(n):
        mq = queues[(start + i) % n]
        if mq.broker_name == last_broker and len({q.broker_name for q in queues}) > 1:
            continue
        if fault is None or fault.available(mq.broker_name):
            return mq
    for i in range(n):
        mq = queues[(start + i) % n]
        if mq.broker_name != last_broker:
            return mq
    return queues[start % n]
