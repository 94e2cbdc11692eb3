"""Producer: send, send_async, send_oneway, send_batch; queue selection with latency fault tolerance.

- Every message gets a unique id (``UNIQ_KEY``), also inside a batch.
- Round-robin over the topic's writable queues; a retry (``retry_times_when_send_failed``, default 2)
  avoids the broker that just failed.
- Failover (RocketMQ's ``sendDefaultImpl``): a refused connection, a timeout, SERVICE_NOT_AVAILABLE (14: a
  deposed master, a slave, a fenced broker) or SYSTEM_ERROR isolates the broker (as a 30000 ms send) and re-reads
  the topic's route from the name server before the retry, so the next attempt goes to the master the name server
  now names; a cached route with no writable queue (a group between masters) is re-read on each send, as Java's
  ``tryToFindTopicPublishInfo``. A broker whose master address changed in the route is available again at once.
- Latency fault tolerance (the seeds' table): a send that took >= 550 ms makes its broker unavailable for
  30 s, >= 1000 ms for 60 s, ... >= 15000 ms for 600 s; a failed send counts as 30000 ms. Unavailable
  brokers are skipped while another is available.
- ``send_timeout`` (3 s) bounds the whole send including retries.
- Single messages with bodies over 4 KiB are sent zlib-compressed (sysFlag COMPRESSED); consumers
  decompress transparently. Batches are sent uncompressed (the batch format has no per-message sysFlag).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import time
import zlib
from collections.abc import Callable
from typing import Any

from broker_core.client.hooks import SendMessageHook, begin_send, end_send, run_send
from broker_core.client.instance import ClientInstance, shared_instance
from broker_core.client.latency import LatencyFaultTolerance, select_one_queue
from broker_core.client.message import SEND_STATUS, ClientError, Message, MessageQueue, SendResult, send_result
from broker_core.codec.message import COMPRESSED_FLAG, PROPERTY_UNIQ_KEY, encode_properties
from broker_core.codec.message_id import UniqueIdGenerator
from broker_core.codec.wire import encode_batch
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.headers import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS
from broker_core.protocol.validation import group_error, topic_error
from broker_core.remoting.blocking import BlockingClient
from broker_core.remoting.client import RemotingTimeout, run_sync

NO_RETRY = {ResponseCode.MESSAGE_ILLEGAL, ResponseCode.NO_PERMISSION}
# answers that mean "not this broker now" (RocketMQ's retryResponseCodes that re-route): isolate it, re-read the route
_REROUTE = frozenset({int(ResponseCode.SERVICE_NOT_AVAILABLE), int(ResponseCode.SYSTEM_ERROR)})
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
_NO_RETRY = frozenset(int(c) for c in NO_RETRY)
_SEND_MESSAGE_V2 = int(RequestCode.SEND_MESSAGE_V2)
_QUEUE_NUMS_TEXT = str(DEFAULT_TOPIC_QUEUE_NUMS)
_BODY_TYPES = (bytes, bytearray)
_VALID_TOPICS_MAX = 1024  # topic names a producer remembers as valid (the check is a regex)

QueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]


def send_fields(group: str, topic: str, sys_flag: int, flag: int, properties: str) -> dict[str, Any]:
    """A SEND_MESSAGE_V2 header without the per-attempt ``e`` (queueId) and ``g`` (bornTimestamp)."""
    return {"a": group, "b": topic, "c": DEFAULT_TOPIC, "d": DEFAULT_TOPIC_QUEUE_NUMS, "f": sys_flag, "h": flag,
            "i": properties, "j": 0, "k": False, "m": False}


def select_by_key(mqs: list[MessageQueue], msg: Message, key: Any) -> MessageQueue:
    """Queue selector for ordered messages: the same sharding key always maps to the same queue."""
    return mqs[zlib.crc32(str(key).encode()) % len(mqs)]


class Producer:
    def __init__(self, group: str, namesrv_addr: str, *, send_timeout: float = 3.0,
                 retry_times_when_send_failed: int = 2, retry_times_when_send_async_failed: int = 2,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 latency_fault_enable: bool = True, compress_msg_body_over_howmuch: int = 4096,
                 instance: ClientInstance | None = None, create_topics: bool = True,
                 credentials: SessionCredentials | None = None, instance_name: str | None = None) -> None:
        """``create_topics``: a topic the name server does not know is sent by ``TBW102``'s route, so a broker
        with ``autoCreateTopicEnable`` creates it on the first send (RocketMQ's behaviour); False refuses such
        sends with TOPIC_NOT_EXIST (the console's producer: a typo in a REST path must not create a topic).
        ``credentials``: the ACL account every request is signed with (brokers with ``aclEnable``); with
        ``instance``, the instance's own are used. ``instance_name``: share the process's client instance of that
        name (RocketMQ's clientId) with other clients given it; by default each client has its own."""
        err = group_error(group)
        if err:
            raise ValueError(err)
        self.group = group
        self.instance = shared_instance(instance, namesrv_addr, credentials, instance_name)
        self.send_timeout = send_timeout
        self.retry_times = retry_times_when_send_failed
        self.retry_times_async = retry_times_when_send_async_failed  # RocketMQ's retryTimesWhenSendAsyncFailed
        self.max_message_size = max_message_size
        self.compress_over = compress_msg_body_over_howmuch
        self.fault = LatencyFaultTolerance() if latency_fault_enable else None
        self.create_topics = create_topics
        self.ids = UniqueIdGenerator()
        self._valid_topics: set[str] = set()
        self._rr = itertools.count()
        self.blocking = BlockingClient(credentials=self.instance.credentials)
        self.send_hooks: list[SendMessageHook] = []
        self.started = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Producer:
        """Raises ValueError when a producer of this group already runs on the same client instance."""
        if self.started:
            return self
        self.instance.register_producer(self.group)
        run_sync(self.instance.start())
        self.instance.heartbeat_sources.append(self._heartbeat_data)
        self.started = True
        return self

    def shutdown(self) -> None:
        if self.started:
            self.instance.producer_groups.discard(self.group)
            if self._heartbeat_data in self.instance.heartbeat_sources:
                self.instance.heartbeat_sources.remove(self._heartbeat_data)
            run_sync(self.instance.shutdown())
            self.blocking.close()
            self.started = False

    def _heartbeat_data(self) -> dict[str, object]:
        return {"producerDataSet": [{"groupName": self.group}]}

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ public API (threads)
    def register_send_message_hook(self, hook: SendMessageHook) -> None:
        """Call ``hook.send_message_before(ctx)`` / ``send_message_after(ctx)`` around every send."""
        self.send_hooks.append(hook)

    def send(self, msg: Message, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
             arg: Any = None) -> SendResult:
        """Synchronous send. Runs on the calling thread over a blocking socket when the topic's route is
        known (the common case); otherwise, and for selectors, through the client event loop."""
        if not self.send_hooks:
            return self._send_sync(msg, queue, selector, arg)
        return run_send(self.send_hooks, self.group, [msg], lambda: self._send_sync(msg, queue, selector, arg))

    def _send_sync(self, msg: Message, queue: MessageQueue | None, selector: QueueSelector | None,
                   arg: Any) -> SendResult:
        route = self.instance.routes.get(msg.topic)
        if route is None or not route.write_queues:
            return run_sync(self.asend(msg, queue, selector, arg))
        if selector is not None:
            queue = selector(route.write_queues, msg, arg)
        props, props_b = self._single(msg)
        body, sys_flag = self._body(msg)
        fields = self._text_fields(msg, props_b, sys_flag)
        monotonic = time.monotonic
        deadline = monotonic() + self.send_timeout
        last_broker: str | None = None
        last_error: Exception | None = None
        for _ in range(1 + (0 if queue is not None else self.retry_times)):
            started = monotonic()
            left = deadline - started
            if left <= 0:
                break
            route = self.instance.routes.get(msg.topic) or route
            mq = queue or self._pick_from(route.write_queues, msg.topic, last_broker)
            addr = self.instance.broker_addr(mq.broker_name)
            qid = mq.queue_id
            fields["e"] = str(qid) if type(qid) is int else qid
            fields["g"] = str(time.time_ns() // 1_000_000)
            cmd = RemotingCommand(_SEND_MESSAGE_V2, 0, 0, fields, body)  # attempts share fields: none changes them
            try:
                resp = self.blocking.invoke(addr, cmd, left)
            except (ConnectionError, RemotingTimeout) as exc:
                self._failed(mq, exc)
                last_broker, last_error = mq.broker_name, exc
                run_sync(self._refresh(msg.topic))
                continue
            error = self._outcome(mq, resp, started)
            if error is None:
                return send_result(resp, mq, props[PROPERTY_UNIQ_KEY])
            last_broker, last_error = mq.broker_name, error
            if resp.code in _REROUTE:
                self._failed(mq, error)
                run_sync(self._refresh(msg.topic))
            elif resp.code == ResponseCode.TOPIC_NOT_EXIST:
                run_sync(self._refresh(msg.topic))
        raise ClientError(int(ResponseCode.SYSTEM_ERROR),
                          f"send to {msg.topic} failed after retries within {self.send_timeout:.1f}s: {last_error}")

    def _failed(self, mq: MessageQueue, exc: Exception) -> None:
        if self.fault is not None:
            self.fault.update(mq.broker_name, 30000)

    def _outcome(self, mq: MessageQueue, resp: RemotingCommand, started: float) -> ClientError | None:
        """None when ``resp`` is a result to return; raises for errors not worth a retry."""
        if self.fault is not None:
            now = time.monotonic()
            self.fault.update(mq.broker_name, (now - started) * 1000, now)
        if resp.code in SEND_STATUS:
            return None
        if resp.code in _NO_RETRY:
            raise ClientError(resp.code, resp.remark)
        return ClientError(resp.code, resp.remark)

    def send_async(self, msg: Message,
                   callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
                   queue: MessageQueue | None = None) -> concurrent.futures.Future[SendResult]:
        """Returns a future (``asyncio.wrap_future`` makes it awaitable); ``callback(result, error)`` runs on
        the client loop thread when given."""
        ctx = begin_send(self.send_hooks, self.group, [msg]) if self.send_hooks else None
        fut = asyncio.run_coroutine_threadsafe(self.asend(msg, queue, retries=self.retry_times_async),
                                               self.instance.loop)
        if ctx is not None:
            fut.add_done_callback(lambda f: end_send(self.send_hooks, ctx, f))
        if callback is not None:
            fut.add_done_callback(lambda f: callback(None, f.exception()) if f.exception()
                                  else callback(f.result(), None))
        return fut

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        run_send(self.send_hooks, self.group, [msg], lambda: run_sync(self.asend_oneway(msg, queue)), oneway=True)

    def send_batch(self, msgs: list[Message], queue: MessageQueue | None = None) -> SendResult:
        return run_send(self.send_hooks, self.group, msgs, lambda: run_sync(self.asend_batch(msgs, queue)))

    # ------------------------------------------------------------------ async API (client loop)
    def _check(self, msg: Message) -> None:
        topic = msg.topic
        if type(topic) is not str or topic not in self._valid_topics:
            err = topic_error(topic)
            if err:
                raise ClientError(int(ResponseCode.MESSAGE_ILLEGAL), err)
            if len(self._valid_topics) < _VALID_TOPICS_MAX:
                self._valid_topics.add(topic)
        self._check_body(msg)

    def _check_body(self, msg: Message) -> None:
        if not isinstance(msg.body, _BODY_TYPES) or not msg.body:
            raise ClientError(int(ResponseCode.MESSAGE_ILLEGAL), "message body must be non-empty bytes")
        if len(msg.body) > self.max_message_size:
            raise ClientError(int(ResponseCode.MESSAGE_ILLEGAL),
                              f"message body is {len(msg.body)} bytes, the limit is {self.max_message_size}")

    async def _pick(self, topic: str, last_broker: str | None) -> MessageQueue:
        route = (await self.instance.publish_route(topic, DEFAULT_TOPIC_QUEUE_NUMS) if self.create_topics
                 else await self.instance.route(topic))
        return self._pick_from(route.write_queues, topic, last_broker)

    def _pick_from(self, queues: list[MessageQueue], topic: str, last_broker: str | None) -> MessageQueue:
        if not queues:
            raise ClientError(int(ResponseCode.TOPIC_NOT_EXIST), f"topic {topic} has no writable queue")
        return select_one_queue(queues, next(self._rr), last_broker, self.fault)

    async def _send(self, topic: str, build: Callable[[MessageQueue], RemotingCommand], queue: MessageQueue | None,
                    selector: QueueSelector | None = None, msg: Message | None = None, arg: Any = None,
                    oneway: bool = False, retries: int | None = None) -> tuple[RemotingCommand | None, MessageQueue]:
        deadline = time.monotonic() + self.send_timeout
        last_broker: str | None = None
        last_error: Exception | None = None
        retries = self.retry_times if retries is None else retries
        for _ in range(1 + (0 if queue is not None or selector is not None else retries)):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            route = self.instance.routes.get(topic)  # cached (the common case): no coroutine to await
            if route is not None and not route.write_queues and queue is None:
                await self._refresh(topic)  # between masters: ask again (Java's tryToFindTopicPublishInfo)
                route = self.instance.routes.get(topic)
            try:
                if queue is not None:
                    mq = queue
                    if route is None:
                        await self.instance.route(topic)
                elif selector is not None:
                    mq = selector((route or await self.instance.route(topic)).write_queues, msg, arg)  # type: ignore[arg-type]  # a str by construction (UNIQ_KEY set above / ids joined)
                elif route is not None:
                    mq = self._pick_from(route.write_queues, topic, last_broker)
                else:
                    mq = await self._pick(topic, last_broker)
            except ClientError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    raise
                last_error = exc
                continue
            addr = self.instance.broker_addr(mq.broker_name)
            cmd = build(mq)
            started = time.monotonic()
            try:
                if oneway:
                    await self.instance.remoting.invoke_oneway(addr, cmd)
                    return None, mq
                resp = await self.instance.invoke(addr, cmd, left)
            except (ConnectionError, RemotingTimeout) as exc:
                self._failed(mq, exc)
                last_broker, last_error = mq.broker_name, exc
                self.instance.remoting.close_channel(addr)
                await self._refresh(topic)
                continue
            error = self._outcome(mq, resp, started)
            if error is None:
                return resp, mq
            last_broker, last_error = mq.broker_name, error
            if resp.code in _REROUTE:
                self._failed(mq, error)
                await self._refresh(topic)
            elif resp.code == ResponseCode.TOPIC_NOT_EXIST:
                await self._refresh(topic)
        raise ClientError(int(ResponseCode.SYSTEM_ERROR),
                          f"send to {topic} failed after retries within {self.send_timeout:.1f}s: {last_error}")

    async def _refresh(self, topic: str) -> None:
        """Re-read the route (shared with every send failing now); a broker whose master moved is available."""
        before = dict(self.instance.broker_addrs)
        await self.instance.refresh_route(topic)
        if self.fault is not None:
            for name, addr in self.instance.broker_addrs.items():
                if before.get(name) not in (None, addr):
                    self.fault.update(name, 0)  # a new master: nothing known against it

    def _text_fields(self, msg: Message, props_b: bytes, sys_flag: int) -> dict[str, Any]:
        """send_fields' header (same keys, same order) already as the text it is encoded as, so encoding
        converts nothing; "e" and "g" are (re)set per attempt, each attempt's command getting its own copy."""
        flag = msg.flag
        return {"a": self.group, "b": msg.topic, "c": DEFAULT_TOPIC, "d": _QUEUE_NUMS_TEXT, "f": str(sys_flag),
                "h": str(flag) if type(flag) is int else flag, "i": props_b.decode(), "j": "0", "k": "false",
                "m": "false"}

    def _single(self, msg: Message) -> tuple[dict[str, str], bytes]:
        self._check(msg)
        return self._properties(msg)

    def _properties(self, msg: Message) -> tuple[dict[str, str], bytes]:
        """The message's properties with a new UNIQ_KEY, and their encoding."""
        props = msg.all_properties()
        props[PROPERTY_UNIQ_KEY] = self.ids.next_id()
        return props, encode_properties(props)

    def _body(self, msg: Message) -> tuple[bytes, int]:
        """Body and sysFlag: bodies over ``compress_msg_body_over_howmuch`` (4 KiB) go zlib-compressed with
        the COMPRESSED flag; consumers decompress transparently."""
        body = bytes(msg.body)
        if self.compress_over and len(body) > self.compress_over:
            packed = zlib.compress(body, 5)
            if len(packed) < len(body):
                return packed, COMPRESSED_FLAG
        return body, 0

    async def asend(self, msg: Message, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
                    arg: Any = None, retries: int | None = None) -> SendResult:
        """``retries``: other brokers tried after a failure (default ``retry_times_when_send_failed``)."""
        props, props_b = self._single(msg)
        body, sys_flag = self._body(msg)
        fields = self._text_fields(msg, props_b, sys_flag)

        def build(mq: MessageQueue) -> RemotingCommand:
            qid = mq.queue_id
            header = fields.copy()
            header["e"] = str(qid) if type(qid) is int else qid
            header["g"] = str(int(time.time() * 1000))
            return RemotingCommand(_SEND_MESSAGE_V2, 0, 0, header, body)

        resp, mq = await self._send(msg.topic, build, queue, selector, msg, arg, retries=retries)
        return send_result(resp, mq, props[PROPERTY_UNIQ_KEY])  # type: ignore[arg-type]  # a str by construction (UNIQ_KEY set above / ids joined)

    async def asend_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        _, props_b = self._single(msg)
        fields = send_fields(self.group, msg.topic, 0, msg.flag, props_b.decode())
        body, fields["f"] = self._body(msg)
        await self._send(msg.topic, lambda mq: RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
            **fields, "e": mq.queue_id, "g": int(time.time() * 1000)}, body, oneway=True), queue, oneway=True)

    async def asend_batch(self, msgs: list[Message], queue: MessageQueue | None = None) -> SendResult:
        if not msgs:
            raise ClientError(int(ResponseCode.MESSAGE_ILLEGAL), "empty batch")
        topic = msgs[0].topic
        self._check(msgs[0])  # the topic once: every message must have it
        entries = []
        ids = []
        for m in msgs:
            if m.topic != topic:
                raise ClientError(int(ResponseCode.MESSAGE_ILLEGAL),
                                  "every message of a batch must have the same topic")
            self._check_body(m)
            props, props_b = self._properties(m)
            ids.append(props[PROPERTY_UNIQ_KEY])
            entries.append((m.flag, bytes(m.body), props_b))
        body = encode_batch(entries)
        if len(body) > self.max_message_size:  # as RocketMQ's client: the whole batch must fit maxMessageSize
            raise ClientError(int(ResponseCode.MESSAGE_ILLEGAL), f"the batch is {len(body)} bytes encoded, the "
                              f"limit is {self.max_message_size}: split it")

        fields = {**send_fields(self.group, topic, 0, 0, ""), "m": True}

        def build(mq: MessageQueue) -> RemotingCommand:
            return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
                **fields, "e": mq.queue_id, "g": int(time.time() * 1000)}, body)

        resp, mq = await self._send(topic, build, queue)
        return send_result(resp, mq, ",".join(ids))  # type: ignore[arg-type]  # a str by construction (UNIQ_KEY set above / ids joined)
