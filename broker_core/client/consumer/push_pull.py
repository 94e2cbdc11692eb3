"""The push consumer's per-queue pull loop, its resource controls and offset commits (a mixin of
:class:`~broker_core.client.consumer.push.PushConsumer`, which owns the state named below).

Per queue, one task: pull (long polling, committing the consumed offset on the way), put the messages into the
queue's :class:`ProcessQueue`, hand them to the consume service. It pauses, never drops, while
- the consumer is suspended (:meth:`suspend` / :meth:`resume`), looking again every ``PULL_DELAY_ON_SUSPEND_S``;
- the queue is over a :class:`FlowControl` limit (count, bytes, topic-wide share, span), every 50 ms;
- after each pull, for ``pull_interval`` s when one is set.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker_core.client.consumer.base import (
    BROKER_SUSPEND_MAX_S,
    PULL_DELAY_ON_ERROR_S,
    PULL_DELAY_ON_FLOW_CONTROL_S,
    PullStatus,
    _ConsumerBase,
)
from broker_core.client.consumer.consume_service import ConcurrentlyConsumeService, ConsumeService
from broker_core.client.consumer.flow_control import FlowControl
from broker_core.client.consumer.offset_store import OffsetStore
from broker_core.client.consumer.process_queue import ProcessQueue
from broker_core.client.consumer.stats import ConsumerStats
from broker_core.client.message import ClientError, MessageQueue
from broker_core.codec import CodecError
from broker_core.codec.message import PROPERTY_RETRY_TOPIC
from broker_core.protocol.filter import Subscription
from broker_core.remoting.client import RemotingTimeout

log = logging.getLogger(__name__)

PULL_DELAY_ON_SUSPEND_S = 1.0  # RocketMQ's PULL_TIME_DELAY_MILLS_WHEN_SUSPEND


class PullingMixin(_ConsumerBase):
    # owned by PushConsumer
    subscriptions: dict[str, Subscription]
    sub_versions: dict[str, int]
    process_queues: dict[MessageQueue, ProcessQueue]
    consume_service: ConsumeService | None
    offset_store: OffsetStore
    flow: FlowControl
    orderly: bool
    running: bool
    suspended: bool
    pull_batch_size: int
    persist_offset_interval: float
    stats: ConsumerStats

    @property
    def clustering(self) -> bool:
        raise NotImplementedError

    async def _start_offset(self, mq: MessageQueue) -> int:
        raise NotImplementedError

    def suspend(self) -> None:
        """Stop pulling (every queue stays assigned; what was pulled is still consumed) until :meth:`resume`."""
        self.suspended = True

    def resume(self) -> None:
        self.suspended = False

    def _queues_of(self, topic: str) -> int:
        return sum(1 for mq in self.process_queues if mq.topic == topic)

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        sub = self.subscriptions[pq.mq.topic]
        while not pq.dropped and self.running:
            if self.suspended:
                await asyncio.sleep(PULL_DELAY_ON_SUSPEND_S)
                continue
            if self.orderly and (not pq.locked or pq.next_offset < 0):
                if pq.locked:
                    try:
                        pq.next_offset = pq.last_committed = await self._start_offset(pq.mq)
                    except (ClientError, ConnectionError, TimeoutError) as exc:
                        log.warning("cannot compute the start offset of %s: %s", pq.mq, exc)
                        await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                        continue
                    log.info("%s now consumes %s in order from %d", self.instance.client_id, pq.mq, pq.next_offset)
                else:
                    await asyncio.sleep(0.1)
                continue
            if self.flow.pause_reason(pq, self._queues_of(pq.mq.topic), not self.orderly) is not None:
                await asyncio.sleep(PULL_DELAY_ON_FLOW_CONTROL_S)
                continue
            try:
                commit = -1
                if self.clustering and pq.committable() != pq.last_committed:
                    commit = pq.last_committed = pq.committable()
                pq.last_pull_timestamp = int(time.time() * 1000)
                began = time.perf_counter()
                res = await self.apull(pq.mq, pq.next_offset, self.pull_batch_size, sub, BROKER_SUSPEND_MAX_S, commit,
                                       self.sub_versions.get(pq.mq.topic, 0))
                if res.messages:  # as RocketMQ's incPullRT/incPullTPS: pulls that found messages
                    self.stats.pulled(pq.mq.topic, (time.perf_counter() - began) * 1000, len(res.messages))
            except asyncio.CancelledError:
                raise
            except (ClientError, ConnectionError, RemotingTimeout, CodecError, TimeoutError) as exc:
                log.warning("pull %s failed: %s", pq.mq, exc)
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                continue
            if pq.dropped:
                return
            if res.status == PullStatus.OFFSET_ILLEGAL:
                log.warning("%s: offset %d is illegal, moving to %d", pq.mq, pq.next_offset, res.next_begin_offset)
            for m in res.messages:
                pq.put(m)
                origin = m.properties.get(PROPERTY_RETRY_TOPIC)
                if origin:  # a retry: the listener sees the topic it subscribed to
                    m.topic = origin
            pq.next_offset = res.next_begin_offset
            if res.messages and self.consume_service is not None:
                self.consume_service.submit(pq, res.messages)
            if self.flow.pull_interval_s > 0:  # pullInterval
                await asyncio.sleep(self.flow.pull_interval_s)

    async def _consume_timeout_loop(self) -> None:
        """consumeTimeout (concurrent consumption): look for stuck listener calls, at least every minute."""
        service = self.consume_service
        if not isinstance(service, ConcurrentlyConsumeService):
            return
        period = max(0.2, min(60.0, service.consume_timeout_s / 4))
        while self.running:
            await asyncio.sleep(period)
            service.clean_expired(list(self.process_queues.values()))

    # ------------------------------------------------------------------ offsets
    async def _persist_loop(self) -> None:
        while self.running:
            await asyncio.sleep(self.persist_offset_interval)
            await self._persist_offsets()

    async def _commit_pq(self, pq: ProcessQueue) -> None:
        """Commit what this queue consumed since the last commit. An owner that consumed nothing stays
        silent: after a rebalance its start offset may already be stale (the previous owner committing
        further at the same moment), and re-sending it would move the group's offset backwards."""
        offset = pq.committable()
        if offset != pq.last_committed or not self.clustering:
            pq.last_committed = offset
            await self.offset_store.update(pq.mq, offset)

    async def _persist_offsets(self) -> None:
        for pq in list(self.process_queues.values()):
            await self._commit_pq(pq)
        await self.offset_store.persist()
