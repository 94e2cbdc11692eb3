"""Running the listener and settling each outcome, as RocketMQ's ConsumeMessageConcurrentlyService and
ConsumeMessageOrderlyService: the push consumer pulls into a :class:`ProcessQueue` and hands the new messages to
one of these; they decide when the listener runs and what a failure means.

Invariants (both services):
- a message leaves its process queue only once it is settled: consumed, or taken by the broker's retry
  topic or DLQ, so the queue's committable offset never passes an unsettled message (at-least-once);
- a listener that raises, returns nothing or returns RECONSUME_LATER has failed; it never loses the message;
- nothing runs for a dropped queue (rebalanced away, or the consumer shut down).

Concurrently: each message runs on the pool at once. A failure is sent back (CONSUMER_SEND_MSG_BACK, delay
level 0 = the broker's choice) to ``%RETRY%<group>``; the broker dead-letters past ``max_reconsume_times``. If
the broker cannot be reached the message runs again locally after ``reconsume_delay`` s. BROADCASTING has
no retry: a failed message is logged and skipped (INVENTORY section 19).

Orderly: one task per queue consumes the lowest offset first, only while the broker's lock is held. A failure
suspends the queue for ``suspend_current_queue_time`` s and retries the same message while the queue's later
messages wait. By default (RocketMQ's ``maxReconsumeTimes`` -1) without limit; with an explicit
``max_reconsume_times``, a message that failed more often is sent to the DLQ (delay level -1) and the queue
moves on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import time
from collections.abc import Callable, Iterable

from broker_core.client.consumer.handoff import Handoff
from broker_core.client.consumer.process_queue import Listener, ProcessQueue
from broker_core.client.consumer.stats import ConsumerStats
from broker_core.client.hooks import ConsumeContext, ConsumeMessageHook, call_hooks
from broker_core.client.instance import ClientInstance
from broker_core.client.message import ClientError, ConsumeStatus, MessageExt
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

TRACE_FLUSH_DELAY_S = 0.05  # consume outcomes are batched this long before one report per broker
CONCURRENT_DEFAULT_MAX_RECONSUME = 16  # RocketMQ's maxReconsumeTimes -1 means this for concurrent consumption ...
ORDERLY_UNLIMITED = (1 << 31) - 1  # ... and Integer.MAX_VALUE (retry in place for ever) for orderly


class ConsumeTrace:
    """Consume outcomes reported to the brokers (REPORT_CONSUME_TRACE, oneway), batched per broker: a consume
    hook (:mod:`broker_core.client.hooks`). :meth:`outcome` runs on the client's event loop, scheduled there from
    the consuming threads."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self._pending: dict[str, list[dict[str, object]]] = {}  # broker name -> outcomes not reported yet

    def consume_message_before(self, ctx: ConsumeContext) -> None:
        ctx.props["trace_started"] = (time.perf_counter(), int(time.time() * 1000))

    def consume_message_after(self, ctx: ConsumeContext) -> None:
        started, started_ms = ctx.props["trace_started"]
        for msg in ctx.messages:
            self.instance.loop.call_soon_threadsafe(self.outcome, msg, ctx.success, started, started_ms)

    def outcome(self, msg: MessageExt, ok: bool, started: float, started_ms: int) -> None:
        first = not self._pending
        self._pending.setdefault(msg.broker_name, []).append({
            "msgId": msg.msg_id, "topic": msg.topic, "group": self.group, "keys": msg.keys,
            "status": "CONSUME_SUCCESS" if ok else "RECONSUME_LATER",
            "costMs": (time.perf_counter() - started) * 1000, "queueId": msg.queue_id,
            "queueOffset": msg.queue_offset, "reconsumeTimes": msg.reconsume_times, "timestamp": started_ms})
        if first:
            asyncio.get_running_loop().call_later(TRACE_FLUSH_DELAY_S, lambda: asyncio.ensure_future(self.flush()))

    async def flush(self) -> None:
        pending, self._pending = self._pending, {}
        for broker, items in pending.items():
            try:
                await self.instance.remoting.invoke_oneway(self.instance.broker_addr(broker), RemotingCommand.request(
                    RequestCode.REPORT_CONSUME_TRACE, {}, json.dumps(items).encode()))
            except (ClientError, ConnectionError) as exc:
                log.debug("trace report to %s failed: %s", broker, exc)


class ConsumeService:
    """What both services share: the listener call on the pool, and sending a message back to the broker."""

    def __init__(self, instance: ClientInstance, group: str, listener: Listener, *,
                 pool: concurrent.futures.ThreadPoolExecutor, running: Callable[[], bool], max_reconsume_times: int,
                 trace: ConsumeTrace | None = None, batch_max_size: int = 1) -> None:
        if batch_max_size < 1:
            raise ValueError("consume_message_batch_max_size must be >= 1")
        self.instance = instance
        self.group = group
        self.listener = listener
        self.pool = pool
        self.running = running
        self.max_reconsume_times = max_reconsume_times
        self.hooks: list[ConsumeMessageHook] = [trace] if trace is not None else []
        self.batch_max_size = batch_max_size  # consumeMessageBatchMaxSize: messages per listener call
        self.stats: ConsumerStats | None = None  # the consumer's RT/TPS counters (GET_CONSUMER_RUNNING_INFO)

    def submit(self, pq: ProcessQueue, msgs: Iterable[MessageExt]) -> None:
        """``msgs`` were just put into ``pq.msgs`` by a pull; consume them (called on the event loop)."""
        raise NotImplementedError

    def consume(self, msgs: list[MessageExt]) -> bool:
        """Run the listener on up to ``batch_max_size`` messages (in a pool thread), between the consume hooks;
        True when it returned CONSUME_SUCCESS, which then holds for all of them (RocketMQ's batch consumption)."""
        ctx = ConsumeContext(self.group, msgs) if self.hooks else None
        if ctx is not None:
            call_hooks(self.hooks, "consume_message_before", ctx)
        began = time.perf_counter()
        try:
            status = self.listener(msgs)
            outcome = status.name if isinstance(status, ConsumeStatus) else "RECONSUME_LATER"
        except Exception:  # a listener error means "consume it again", never a lost message
            log.exception("listener of %s raised for %s", self.group, [m.msg_id for m in msgs])
            status, outcome = None, "EXCEPTION"
        ok = status is ConsumeStatus.CONSUME_SUCCESS
        if self.stats is not None and msgs:
            self.stats.consumed(msgs[0].topic, (time.perf_counter() - began) * 1000, len(msgs), ok)
        if ctx is not None:
            ctx.success, ctx.status = ok, outcome
            call_hooks(self.hooks, "consume_message_after", ctx)
        return ok

    async def send_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK: True when the broker took the message (into the retry topic, or the DLQ for
        ``delay_level`` -1 or past the maximum); False when it refused or could not be reached."""
        try:
            resp = await self.instance.invoke(self.instance.broker_addr(msg.broker_name), RemotingCommand.request(
                RequestCode.CONSUMER_SEND_MSG_BACK, {
                    "group": self.group, "offset": msg.commit_log_offset, "delayLevel": delay_level,
                    "originTopic": msg.topic, "maxReconsumeTimes": self.max_reconsume_times,
                    "originMsgId": msg.msg_id, "unitMode": False}))
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("send back of %s failed: %s", msg.msg_id, exc)
            return False
        if resp.code != ResponseCode.SUCCESS:
            log.warning("send back of %s refused: %s", msg.msg_id, resp.remark)
            return False
        return True


class ConcurrentlyConsumeService(ConsumeService):
    """Also enforces ``consumeTimeout``: :meth:`clean_expired` sends back a message whose listener call has run
    longer than ``consume_timeout_s`` (delay level 3, as RocketMQ's ``cleanExpireMsg``) and takes it out of its
    queue, so one stuck call cannot hold the queue's offset for ever; the call's late result is ignored."""

    def __init__(self, instance: ClientInstance, group: str, listener: Listener, *,
                 pool: concurrent.futures.ThreadPoolExecutor, running: Callable[[], bool], max_reconsume_times: int,
                 clustering: bool, reconsume_delay: float, trace: ConsumeTrace | None = None,
                 batch_max_size: int = 1, consume_timeout_s: float = 15 * 60, workers: int = 20) -> None:
        super().__init__(instance, group, listener, pool=pool, running=running,
                         max_reconsume_times=max_reconsume_times, trace=trace, batch_max_size=batch_max_size)
        # listener calls run on up to ``workers`` pool threads at once (the pool's size: consumeThreadMax)
        self._handoff: Handoff[tuple[ProcessQueue, list[MessageExt]], bool] = Handoff(
            pool, workers, self._consume_item, self._settle)
        self.clustering = clustering
        self.reconsume_delay = reconsume_delay
        self.consume_timeout_s = consume_timeout_s
        self.expired = 0  # messages sent back by consumeTimeout
        self._background: set[asyncio.Task[None]] = set()

    def submit(self, pq: ProcessQueue, msgs: Iterable[MessageExt]) -> None:
        batch = list(msgs)
        for i in range(0, len(batch), self.batch_max_size):
            self._run(pq, batch[i:i + self.batch_max_size])

    def _run(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        now = time.monotonic()
        pq.last_consume_timestamp = int(time.time() * 1000)
        for m in msgs:
            pq.consuming_since[m.queue_offset] = now
        self._handoff.put((pq, msgs))

    def _consume_item(self, item: tuple[ProcessQueue, list[MessageExt]]) -> bool:
        return self.consume(item[1])

    def _settle(self, outcomes: list[tuple[tuple[ProcessQueue, list[MessageExt]], bool | Exception]]) -> None:
        """On the loop: the outcomes of listener calls that finished since the last delivery."""
        for (pq, msgs), ok in outcomes:
            if isinstance(ok, Exception):  # consume() itself failed (a hook raised): the messages failed
                log.error("consuming %s failed: %r", [m.msg_id for m in msgs], ok)
            self._consumed(pq, msgs, ok is True)

    def _consumed(self, pq: ProcessQueue, msgs: list[MessageExt], ok: bool) -> None:
        for msg in msgs:
            if pq.dropped or pq.msgs.get(msg.queue_offset) is not msg:
                continue  # dropped, or taken out by consumeTimeout
            if ok:
                pq.remove(msg.queue_offset)
            elif not self.clustering:  # broadcasting: no retry (INVENTORY §19); the message is skipped
                log.warning("%s: broadcast message %s failed and is skipped", self.group, msg.msg_id)
                pq.remove(msg.queue_offset)
            else:
                pq.consuming_since.pop(msg.queue_offset, None)
                self._background_send_back(pq, msg, 0)

    def _background_send_back(self, pq: ProcessQueue, msg: MessageExt, delay_level: int) -> None:
        task = asyncio.ensure_future(self._send_back(pq, msg, delay_level))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _send_back(self, pq: ProcessQueue, msg: MessageExt, delay_level: int = 0) -> None:
        """Hand a failed message to the broker's retry topic (or DLQ past the maximum); retry locally only
        if the broker cannot take it."""
        if await self.send_back(msg, delay_level):
            if pq.msgs.get(msg.queue_offset) is msg:
                pq.remove(msg.queue_offset)
            return
        msg.reconsume_times += 1
        asyncio.get_running_loop().call_later(self.reconsume_delay, lambda: self._retry(pq, msg))

    def _retry(self, pq: ProcessQueue, msg: MessageExt) -> None:
        if pq.dropped or not self.running() or pq.msgs.get(msg.queue_offset) is not msg:
            return
        self._run(pq, [msg])

    def clean_expired(self, queues: Iterable[ProcessQueue]) -> int:
        """consumeTimeout: send back (clustering) or skip (broadcasting) each message whose listener call started
        more than ``consume_timeout_s`` ago. Returns how many were taken out."""
        deadline = time.monotonic() - self.consume_timeout_s
        n = 0
        for pq in queues:
            for offset, since in sorted(pq.consuming_since.items()):
                msg = pq.msgs.get(offset)
                if since > deadline or msg is None or pq.dropped:
                    continue
                log.warning("%s: %s has been consumed for more than %.0f s: sent back", self.group, msg.msg_id,
                            self.consume_timeout_s)
                pq.consuming_since.pop(offset, None)
                n += 1
                if self.clustering:
                    self._background_send_back(pq, msg, 3)  # RocketMQ's cleanExpireMsg sends back at level 3
                else:
                    pq.remove(offset)
        self.expired += n
        return n


class OrderlyConsumeService(ConsumeService):
    def __init__(self, instance: ClientInstance, group: str, listener: Listener, *,
                 pool: concurrent.futures.ThreadPoolExecutor, running: Callable[[], bool], max_reconsume_times: int,
                 suspend_current_queue_time: float, trace: ConsumeTrace | None = None,
                 batch_max_size: int = 1) -> None:
        super().__init__(instance, group, listener, pool=pool, running=running,
                         max_reconsume_times=max_reconsume_times, trace=trace, batch_max_size=batch_max_size)
        self.suspend_current_queue_time = suspend_current_queue_time

    def submit(self, pq: ProcessQueue, msgs: Iterable[MessageExt]) -> None:
        if pq.worker is None or pq.worker.done():
            pq.worker = asyncio.ensure_future(self._worker(pq))

    async def _worker(self, pq: ProcessQueue) -> None:
        loop = asyncio.get_running_loop()
        while pq.msgs and not pq.dropped and self.running():
            if not pq.locked:
                await asyncio.sleep(0.1)
                continue
            batch = [pq.msgs[o] for o in sorted(pq.msgs)[:self.batch_max_size]]  # the lowest offsets, in order
            pq.last_consume_timestamp = int(time.time() * 1000)
            ok = await loop.run_in_executor(self.pool, self.consume, batch)
            if pq.dropped:
                return
            if ok:
                for m in batch:
                    pq.remove(m.queue_offset)
                continue
            for m in batch:
                m.reconsume_times += 1
            if batch[0].reconsume_times > self.max_reconsume_times and all(
                    [await self.send_back(m, -1) for m in batch]):
                for m in batch:
                    pq.remove(m.queue_offset)
                continue
            await asyncio.sleep(self.suspend_current_queue_time)
        log.info("%s no longer consumes %s", self.instance.client_id, pq.mq)
