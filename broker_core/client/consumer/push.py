"""PushConsumer: pull-based, rebalanced, with flow control and committed offsets.

PushConsumer invariants:
1. In CLUSTERING mode a queue is consumed by at most one member of the group at a time: queues are
   allocated from the sorted queue and member lists (rebalance every 20 s and whenever the broker
   announces a membership change).
2. The committed offset of a queue is the smallest offset still being consumed (or the next offset when
   nothing is in flight), so a crash re-delivers rather than skips: at-least-once.
3. Flow control: a queue stops pulling while it caches more than ``pull_threshold_for_queue`` (1000) messages
   or ``pull_threshold_size_for_queue`` (100 MiB) of bodies, a topic-wide limit's share when one is set, or
   (concurrent) its cached offsets span more than ``consume_concurrently_max_span`` (2000); see
   :mod:`.flow_control`. ``suspend()`` stops all pulling until ``resume()``; ``pull_interval`` pauses after each pull.
4. BROADCASTING: every member consumes every queue; offsets live in a local file, not on the broker, at
   ``<offset_store_dir>/<ip>@<instance_name>/<group>/offsets.json`` (RocketMQ's layout; ``instance_name``
   defaults to ``DEFAULT`` as there), so a restarted member resumes where it stopped. Two members of one
   group on one host need different instance names.
What happens to each pulled message (the listener call, retry through ``%RETRY%<group>``, the DLQ after
``max_reconsume_times``, orderly suspension) is :mod:`.consume_service`'s; this module pulls, rebalances,
locks and commits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from pathlib import Path

from broker_core.client.allocate import AllocateMessageQueueAveragely
from broker_core.client.consumer.base import (
    _FROM_ROCKETMQ,
    _FROM_WIRE,
    CONSUME_FROM_FIRST,
    CONSUME_FROM_LAST,
    CONSUME_FROM_TIMESTAMP,
    check_client_in_brokers,
    subscription_data,
)
from broker_core.client.consumer.client_requests import ClientRequestProcessor
from broker_core.client.consumer.consume_service import (
    CONCURRENT_DEFAULT_MAX_RECONSUME,
    ORDERLY_UNLIMITED,
    ConcurrentlyConsumeService,
    ConsumeService,
    ConsumeTrace,
    OrderlyConsumeService,
)
from broker_core.client.consumer.flow_control import FlowControl
from broker_core.client.consumer.offset_store import (
    DEFAULT_LOCAL_OFFSET_ROOT,
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
    local_offset_path,
)
from broker_core.client.consumer.process_queue import Listener, ProcessQueue
from broker_core.client.consumer.push_pull import PullingMixin
from broker_core.client.consumer.rebalance import QueueLocks, allocate
from broker_core.client.consumer.stats import ConsumerStats
from broker_core.client.hooks import ConsumeMessageHook
from broker_core.client.instance import (
    NOTIFY_CONSUMER_IDS_CHANGED,
    RESET_CONSUMER_CLIENT_OFFSET,
    ClientInstance,
    local_ip,
)
from broker_core.client.message import ClientError, MessageQueue
from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.bodies import decode_mq_offset_table
from broker_core.protocol.filter import Subscription, parse_subscription
from broker_core.protocol.validation import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from broker_core.remoting.client import run_sync
from broker_core.remoting.loops import within

log = logging.getLogger(__name__)


class PushConsumer(PullingMixin):
    """RocketMQ's DefaultMQPushConsumer. Resource controls (RocketMQ's names): ``pull_threshold_for_queue``,
    ``pull_threshold_size_for_queue`` (MiB), ``pull_threshold_for_topic`` / ``pull_threshold_size_for_topic``
    (-1 = off), ``consume_concurrently_max_span``, ``pull_interval`` (s), ``consume_message_batch_max_size``
    (messages per listener call), ``consume_timeout`` (minutes a concurrent listener call may take before its
    messages are sent back), ``await_termination_when_shutdown`` (s; RocketMQ's awaitTerminationMillisWhenShutdown,
    0 as there: how long ``shutdown`` lets the concurrent listener calls under way finish, pulls stopped, before it
    commits the offsets; a call still running then has its message delivered again after a restart)."""

    def __init__(self, group: str, namesrv_addr: str, *, message_model: str = "CLUSTERING",
                 consume_from: str = CONSUME_FROM_LAST, consume_timestamp_ms: int | None = None,
                 allocate_strategy: object | None = None, pull_batch_size: int = 32, consume_thread_max: int = 20,
                 pull_threshold_for_queue: int = 1000, consume_concurrently_max_span: int = 2000,
                 pull_threshold_size_for_queue: int = 100, pull_threshold_for_topic: int = -1,
                 pull_threshold_size_for_topic: int = -1, pull_interval: float = 0.0,
                 consume_message_batch_max_size: int = 1, consume_timeout: float = 15.0,
                 rebalance_interval: float = 20.0, persist_offset_interval: float = 5.0,
                 reconsume_delay: float = 1.0, offset_store_dir: str | os.PathLike[str] | None = None,
                 max_reconsume_times: int = -1, suspend_current_queue_time: float = 1.0,
                 lock_interval: float = 20.0, enable_trace: bool = False,
                 instance: ClientInstance | None = None, instance_name: str = "DEFAULT",
                 credentials: SessionCredentials | None = None, await_termination_when_shutdown: float = 0.0) -> None:
        super().__init__(group, namesrv_addr, instance, credentials)
        if message_model not in ("CLUSTERING", "BROADCASTING"):
            raise ValueError("message_model must be CLUSTERING or BROADCASTING")
        consume_from = _FROM_ROCKETMQ.get(consume_from, consume_from)
        if consume_from not in _FROM_WIRE:
            raise ValueError("consume_from must be LAST, FIRST or TIMESTAMP (or RocketMQ's CONSUME_FROM_* names)")
        self.message_model = message_model
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms or int((time.time() - 1800) * 1000)
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.locks = QueueLocks(self.instance, group)
        self.pull_batch_size = pull_batch_size
        self.flow = FlowControl(pull_threshold_for_queue, pull_threshold_size_for_queue, pull_threshold_for_topic,
                                pull_threshold_size_for_topic, consume_concurrently_max_span, pull_interval)
        if consume_message_batch_max_size < 1 or consume_timeout <= 0:
            raise ValueError("consume_message_batch_max_size must be >= 1 and consume_timeout > 0")
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.consume_timeout_s = consume_timeout * 60
        self.await_termination_when_shutdown = await_termination_when_shutdown
        self.suspended = False
        self.consume_hooks: list[ConsumeMessageHook] = []
        self.rebalance_interval = rebalance_interval
        self.persist_offset_interval = persist_offset_interval
        self.reconsume_delay = reconsume_delay
        # -1 (the default, as RocketMQ's maxReconsumeTimes): 16 for concurrent consumption, no limit for orderly
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time = suspend_current_queue_time
        self.lock_interval = lock_interval
        self.subscriptions: dict[str, Subscription] = {}
        self.sub_versions: dict[str, int] = {}  # topic -> subVersion (ms when subscribed), as in SubscriptionData
        self.listener: Listener | None = None
        self.orderly = False
        self.enable_trace = enable_trace
        self.consume_service: ConsumeService | None = None  # built by start(), by the listener's kind
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.consume_thread_max = consume_thread_max
        self.pool = concurrent.futures.ThreadPoolExecutor(consume_thread_max, thread_name_prefix=f"consume-{group}")
        # RocketMQ's place for BROADCASTING offsets: stable across restarts of the same instance name
        self.instance_name = instance_name
        self.offset_file = local_offset_path(Path(offset_store_dir or DEFAULT_LOCAL_OFFSET_ROOT), local_ip(),
                                             instance_name, group)
        self.offset_store: OffsetStore = RemoteBrokerOffsetStore(group, self._admin_request)
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_now: asyncio.Event | None = None
        self.running = False
        self.stats = ConsumerStats()  # pull and consume rates (GET_CONSUMER_RUNNING_INFO's statusTable)
        self.start_timestamp_ms = 0

    # ------------------------------------------------------------------ configuration
    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Consume ``topic`` by tag (``*``, ``TagA || TagB``) or, with ``expression_type="SQL92"``, by a SQL92
        expression over message properties (``MessageSelector.bySql``; the broker needs
        ``enablePropertyFilter=true``). A bad expression raises ``SubscriptionParseError`` here."""
        self.subscriptions[topic] = parse_subscription(topic, expression, expression_type)
        self.sub_versions[topic] = time.time_ns() // 1_000_000

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """Call ``hook.consume_message_before(ctx)`` / ``consume_message_after(ctx)`` around every listener call
        (register before ``start()``)."""
        self.consume_hooks.append(hook)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``: its queues are dropped (their offsets committed) at once when running,
        and the next heartbeat no longer lists it."""
        self.subscriptions.pop(topic, None)
        self.sub_versions.pop(topic, None)
        if self.running and self._rebalance_now is not None:
            self.instance.loop.call_soon_threadsafe(self._rebalance_now.set)

    def register_message_listener(self, listener: Listener, orderly: bool = False) -> None:
        """``orderly=True``: each queue is consumed by one thread at a time, in offset order, while this
        consumer holds the broker's lock on it (renewed every ``lock_interval`` s). A failure blocks the queue
        and retries the same message every ``suspend_current_queue_time`` s, without limit unless
        ``max_reconsume_times`` was given: past it the message goes to the DLQ and the queue moves on."""
        self.listener = listener
        self.orderly = orderly

    @property
    def clustering(self) -> bool:
        return self.message_model == "CLUSTERING"

    def assigned_queues(self, topic: str | None = None) -> list[MessageQueue]:
        """Queues this consumer owns now (of ``topic`` only, when given: the group's retry topic is
        subscribed automatically and has queues too)."""
        return sorted(mq for mq in self.process_queues if topic is None or mq.topic == topic)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> PushConsumer:
        if self.listener is None or not self.subscriptions:
            raise ValueError("subscribe() and register_message_listener() before start()")
        if self.orderly and not self.clustering:
            raise ValueError("orderly consumption needs CLUSTERING")
        if self.clustering and not self.orderly:  # failed messages come back through the group's retry topic
            if retry_topic(self.group) not in self.subscriptions:
                self.subscribe(retry_topic(self.group), "*")
        if not self.clustering:
            self.offset_store = LocalFileOffsetStore(self.offset_file)
        self.consume_service = self._consume_service(self.listener)
        self.consume_service.hooks += self.consume_hooks
        self.consume_service.stats = self.stats
        self.start_timestamp_ms = int(time.time() * 1000)
        run_sync(self._astart())
        return self

    def _consume_service(self, listener: Listener) -> ConsumeService:
        trace = ConsumeTrace(self.instance, self.group) if self.enable_trace else None
        if self.orderly:
            return OrderlyConsumeService(self.instance, self.group, listener, pool=self.pool,
                                         running=lambda: self.running,
                                         max_reconsume_times=(ORDERLY_UNLIMITED if self.max_reconsume_times < 0
                                                              else self.max_reconsume_times),
                                         suspend_current_queue_time=self.suspend_current_queue_time, trace=trace,
                                         batch_max_size=self.consume_message_batch_max_size)
        return ConcurrentlyConsumeService(self.instance, self.group, listener, pool=self.pool,
                                          running=lambda: self.running,
                                          max_reconsume_times=(CONCURRENT_DEFAULT_MAX_RECONSUME
                                                               if self.max_reconsume_times < 0
                                                               else self.max_reconsume_times),
                                          clustering=self.clustering, reconsume_delay=self.reconsume_delay,
                                          trace=trace, batch_max_size=self.consume_message_batch_max_size,
                                          consume_timeout_s=self.consume_timeout_s, workers=self.consume_thread_max)

    async def _astart(self) -> None:
        self._register()
        await self.instance.start()
        self.running = True
        self._rebalance_now = asyncio.Event()
        self.instance.heartbeat_sources.append(self._heartbeat_data)
        self.instance.notification_handlers.setdefault(NOTIFY_CONSUMER_IDS_CHANGED, []).append(self._on_ids_changed)
        self.instance.notification_handlers.setdefault(RESET_CONSUMER_CLIENT_OFFSET, []).append(self._on_reset)
        ClientRequestProcessor(self.instance).install(self)  # answers 307/309/221 for this group
        for topic in self.subscriptions:
            try:
                await self.instance.route(topic)
            except ClientError as exc:
                if topic != retry_topic(self.group):  # the retry topic appears with the first failure
                    raise
                log.debug("no route for %s yet: %s", topic, exc)
        try:
            await check_client_in_brokers(self.instance, self.group, self.subscriptions, self.sub_versions)
        except ClientError:
            self.running = False
            self._unregister()
            await self.instance.shutdown()
            raise
        await self.instance.heartbeat_all()
        await self.rebalance()
        self._tasks += [asyncio.ensure_future(self._rebalance_loop()), asyncio.ensure_future(self._persist_loop()),
                        asyncio.ensure_future(self._consume_timeout_loop())]
        if self.orderly:
            self._tasks.append(asyncio.ensure_future(self._lock_loop()))

    def shutdown(self) -> None:
        if not self.running:
            return
        run_sync(self._ashutdown())
        self.pool.shutdown(wait=True)

    async def _ashutdown(self) -> None:
        self.running = False
        for t in self._tasks:
            t.cancel()
        await self._await_listeners()
        for pq in list(self.process_queues.values()):
            await self._drop(pq)
        await self._persist_offsets()
        for addr in set(self.instance.broker_addrs.values()):
            try:
                await self.instance.invoke(addr, RemotingCommand.request(
                    RequestCode.UNREGISTER_CLIENT, {"clientID": self.instance.client_id, "consumerGroup": self.group}))
            except (ConnectionError, TimeoutError):
                pass
        if self._heartbeat_data in self.instance.heartbeat_sources:
            self.instance.heartbeat_sources.remove(self._heartbeat_data)
        if self.instance.consumer_table.get(self.group) is self:
            del self.instance.consumer_table[self.group]
        self._unregister()
        await self.instance.shutdown()

    async def _await_listeners(self) -> None:
        """Stop pulling, then wait up to ``await_termination_when_shutdown`` for the listener calls under way (queued
        or running) to finish and settle, so that the offsets committed next cover them."""
        if self.await_termination_when_shutdown <= 0:
            return
        for pq in self.process_queues.values():
            if pq.task is not None:
                pq.task.cancel()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.await_termination_when_shutdown
        while any(pq.consuming_since for pq in self.process_queues.values()) and loop.time() < deadline:
            await asyncio.sleep(0.01)

    def _heartbeat_data(self) -> dict[str, object]:
        """This consumer's ``ConsumerData`` of RocketMQ's HeartbeatData (``consumeOrderly`` is ours; Java
        brokers ignore fields they do not know)."""
        return {"consumerDataSet": [{
            "groupName": self.group, "consumeType": "CONSUME_PASSIVELY", "messageModel": self.message_model,
            "consumeFromWhere": _FROM_WIRE[self.consume_from], "unitMode": False, "consumeOrderly": self.orderly,
            "subscriptionDataSet": [subscription_data(s, self.sub_versions.get(s.topic, 0))
                                    for s in self.subscriptions.values()]}]}

    def _on_ids_changed(self, cmd: RemotingCommand) -> None:
        if cmd.header.get("consumerGroup") == self.group and self._rebalance_now is not None:
            self._rebalance_now.set()

    def _on_reset(self, cmd: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: header ``topic, group``; body ``ResetOffsetBody`` keyed by queue."""
        if cmd.header.get("group") != self.group:
            return
        topic = str(cmd.header.get("topic"))
        try:
            table = decode_mq_offset_table(cmd.body or b"{}")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring a malformed offset reset for %s: %s", self.group, exc)
            return
        offsets = {(b, q): int(o) for (t, b, q), o in table.items() if t == topic}
        for mq, pq in list(self.process_queues.items()):
            if mq.topic == topic and (mq.broker_name, mq.queue_id) in offsets:
                pq.clear()
                pq.next_offset = pq.last_committed = offsets[(mq.broker_name, mq.queue_id)]

    # ------------------------------------------------------------------ rebalance
    async def _rebalance_loop(self) -> None:
        assert self._rebalance_now is not None
        while self.running:  # also ends the loop if a cancellation were lost (within keeps it; wait_for did not)
            try:
                await within(self._rebalance_now.wait(), self.rebalance_interval)
            except TimeoutError:
                pass
            self._rebalance_now.clear()
            try:
                await self.rebalance()
            except (ClientError, ConnectionError, TimeoutError) as exc:
                log.warning("rebalance of %s failed: %s", self.group, exc)

    async def rebalance(self) -> None:
        wanted = await allocate(self.instance, self.group, list(self.subscriptions), self.clustering,
                                self.allocate_strategy)
        for mq in [mq for mq in self.process_queues if mq not in wanted]:
            await self._drop(self.process_queues[mq])
        for mq in sorted(wanted - set(self.process_queues)):
            if self.orderly:  # the start offset is read once the lock is held (the last holder has committed)
                pq = ProcessQueue(mq, -1)
                self.process_queues[mq] = pq
                pq.task = asyncio.ensure_future(self._pull_loop(pq))
                continue
            try:
                offset = await self._start_offset(mq)
            except (ClientError, ConnectionError, TimeoutError) as exc:
                log.warning("cannot compute the start offset of %s: %s", mq, exc)
                continue
            pq = ProcessQueue(mq, offset, last_committed=offset)
            self.process_queues[mq] = pq
            pq.task = asyncio.ensure_future(self._pull_loop(pq))
            log.info("%s now consumes %s from offset %d", self.instance.client_id, mq, offset)
        if self.orderly:
            await self._lock_all()

    async def _start_offset(self, mq: MessageQueue) -> int:
        """RocketMQ's ``computePullFromWhere``: the committed offset; else, for a retry topic, 0 (so first
        retries are never skipped); else by ``consume_from``."""
        stored = await self.offset_store.read(mq)
        if stored is not None:
            return stored
        if self.clustering and mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 0
        if self.consume_from == CONSUME_FROM_FIRST:
            return await self._offset(mq, RequestCode.GET_MIN_OFFSET)
        if self.consume_from == CONSUME_FROM_TIMESTAMP:
            return await self._offset(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                      {"timestamp": self.consume_timestamp_ms})
        return await self._offset(mq, RequestCode.GET_MAX_OFFSET)

    async def _drop(self, pq: ProcessQueue) -> None:
        pq.dropped = True
        if pq.task is not None:
            pq.task.cancel()
        if pq.worker is not None:
            pq.worker.cancel()
        self.process_queues.pop(pq.mq, None)
        if pq.next_offset >= 0:
            await self._commit_pq(pq)
        if pq.locked:
            pq.locked = False
            await self.locks.unlock(pq.mq)

    # ------------------------------------------------------------------ orderly: queue locks
    async def _lock_all(self) -> None:
        held = await self.locks.lock(list(self.process_queues))
        for mq, pq in list(self.process_queues.items()):
            pq.locked = mq in held
            if pq.locked:
                pq.last_lock_timestamp = int(time.time() * 1000)

    async def _lock_loop(self) -> None:
        while self.running:
            await asyncio.sleep(self.lock_interval)
            await self._lock_all()
