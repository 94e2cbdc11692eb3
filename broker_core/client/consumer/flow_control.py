"""A push consumer's resource controls, as RocketMQ's ``DefaultMQPushConsumer`` settings:

- ``pullThresholdForQueue`` (1000 messages) and ``pullThresholdSizeForQueue`` (100 MiB of bodies) cached per queue;
- ``pullThresholdForTopic`` / ``pullThresholdSizeForTopic`` (-1 = off): a topic-wide limit, split evenly over the
  queues of the topic this consumer holds (RocketMQ's rule), which then replaces the per-queue one;
- ``consumeConcurrentlyMaxSpan`` (2000): the offset span cached in a queue (concurrent consumption);
- ``pullInterval`` (0 ms): a pause after each pull of a queue.

A queue over a limit stops pulling and looks again every ``PULL_DELAY_ON_FLOW_CONTROL_S`` (RocketMQ: 50 ms) until
consumption brings it under; nothing is dropped. ``times`` counts the pauses (RocketMQ logs every 1000th).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from broker_core.client.consumer.process_queue import ProcessQueue

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass
class FlowControl:
    threshold_for_queue: int = 1000
    threshold_size_for_queue_mib: int = 100
    threshold_for_topic: int = -1
    threshold_size_for_topic_mib: int = -1
    max_span: int = 2000
    pull_interval_s: float = 0.0
    times: int = 0

    def __post_init__(self) -> None:
        if self.threshold_for_queue < 1 or self.threshold_size_for_queue_mib < 1:
            raise ValueError("pull thresholds per queue must be >= 1")
        if self.pull_interval_s < 0:
            raise ValueError("pull_interval must be >= 0")

    def limits(self, queues_of_topic: int) -> tuple[int, int]:
        """(messages, bytes) one queue may cache, given how many queues of its topic this consumer holds."""
        count, size = self.threshold_for_queue, self.threshold_size_for_queue_mib * MIB
        n = max(1, queues_of_topic)
        if self.threshold_for_topic > 0:
            count = max(1, self.threshold_for_topic // n)
        if self.threshold_size_for_topic_mib > 0:
            size = max(1, self.threshold_size_for_topic_mib * MIB // n)
        return count, size

    def pause_reason(self, pq: ProcessQueue, queues_of_topic: int, concurrent: bool) -> str | None:
        """Why ``pq`` must not pull now, or None."""
        count, size = self.limits(queues_of_topic)
        reason = None
        if len(pq.msgs) > count:
            reason = f"the cached message count exceeds the threshold {count}: {len(pq.msgs)}"
        elif pq.msg_size > size:
            reason = f"the cached message size exceeds the threshold {size // MIB} MiB: {pq.msg_size} bytes"
        elif concurrent and pq.span() > self.max_span:
            reason = f"the queue's max span is too long: {pq.span()} > {self.max_span}"
        if reason is not None:
            if self.times % 1000 == 0:
                log.warning("%s: %s, so do flow control (%d times)", pq.mq, reason, self.times)
            self.times += 1
        return reason
