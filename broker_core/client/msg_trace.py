"""Client-side message trace, as RocketMQ's clients write it with ``enableMsgTrace``: a send hook records a Pub per
message sent, a consume hook a SubBefore and a SubAfter per message consumed (sharing a request id), in the
``TraceDataEncoder`` layout (:mod:`broker_core.codec.trace_data`), sent in batches to ``RMQ_SYS_TRACE_TOPIC`` (or
the topic given) by an inner producer ``_INNER_TRACE_PRODUCER-<group>``, each trace message keyed by the traced
message ids and their keys so a lookup by message id finds them (what rocketmq-dashboard and our trace page do).

``tracer = enable_msg_trace(producer_or_push_consumer)`` before ``start()``; ``tracer.shutdown()`` after the client's
shutdown flushes what is left. Records wait at most ``flush_interval_s`` (0.1 s) or until ``batch_size`` (100) are
queued; a full queue (2048) drops new records (a trace never slows or fails the traced client), counted in
``dropped``. A trace send that fails is logged and its records dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from broker_core.client.hooks import ConsumeContext, SendContext
from broker_core.client.message import ClientError, Message
from broker_core.codec.message_id import UniqueIdGenerator
from broker_core.codec.names import TRACE_TOPIC
from broker_core.codec.trace_data import encode_trace_record

log = logging.getLogger(__name__)

QUEUE_SIZE = 2048
BATCH_SIZE = 100
MAX_BODY_BYTES = 118_000  # RocketMQ's AsyncTraceDispatcher flushes a batch at about this size


class MsgTracer:
    """Both hooks (send and consume) and the dispatcher thread."""

    def __init__(self, group: str, namesrv_addr: str, *, trace_topic: str = TRACE_TOPIC, region: str = "DefaultRegion",
                 flush_interval_s: float = 0.1, batch_size: int = BATCH_SIZE, producer: Any = None,
                 traced_instance: Any = None) -> None:
        """``traced_instance``: the traced client's ClientInstance (its broker addresses name the store host)."""
        self.group = group
        self.trace_topic = trace_topic
        self.region = region
        self.flush_interval_s = flush_interval_s
        self.batch_size = batch_size
        self.queue: queue.Queue[tuple[str, list[str]]] = queue.Queue(QUEUE_SIZE)
        self.dropped = 0
        self.ids = UniqueIdGenerator()
        if producer is None:
            from broker_core.client.producer import Producer

            producer = Producer(f"_INNER_TRACE_PRODUCER-{group}", namesrv_addr)
        self.producer = producer
        self.traced_instance = traced_instance
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ records in
    def _put(self, record: dict[str, Any], keys: list[str]) -> None:
        try:
            self.queue.put_nowait((encode_trace_record(record), keys))
        except queue.Full:
            self.dropped += 1
        self._ensure_thread()

    def send_message_before(self, ctx: SendContext) -> None:
        ctx.props["trace_started"] = (time.perf_counter(), int(time.time() * 1000))

    def send_message_after(self, ctx: SendContext) -> None:
        started, started_ms = ctx.props.get("trace_started", (time.perf_counter(), int(time.time() * 1000)))
        result = ctx.result
        if result is None or ctx.oneway:
            return  # RocketMQ traces only sends with a result
        cost = int((time.perf_counter() - started) * 1000)
        ids = result.msg_id.split(",")
        offsets = result.offset_msg_id.split(",")
        broker = ctx.queue.broker_name if ctx.queue is not None else ""
        store_host = self._store_host(broker)
        for i, msg in enumerate(ctx.messages):
            msg_id = ids[i] if i < len(ids) else ids[-1]
            keys = msg.keys if isinstance(msg.keys, str) else " ".join(msg.keys or [])
            self._put({"type": "Pub", "timestamp": started_ms, "regionId": self.region, "groupName": ctx.producer_group,
                       "topic": msg.topic, "msgId": msg_id, "tags": msg.tags, "keys": keys, "storeHost": store_host,
                       "bodyLength": len(msg.body), "costTime": cost // max(1, len(ctx.messages)),
                       "msgType": "Delay_Msg" if msg.delay_level else "Normal_Msg",
                       "offsetMsgId": offsets[i] if i < len(offsets) else "", "success": ctx.exception is None},
                      [msg_id, *(keys.split() if keys else [])])

    def _store_host(self, broker_name: str) -> str:
        """The master address the traced client sent to (RocketMQ's ``context.getBrokerAddr()``)."""
        for instance in (self.traced_instance, getattr(self.producer, "instance", None)):
            addr = getattr(instance, "broker_addrs", {}).get(broker_name) if instance is not None else None
            if addr:
                return str(addr)
        return broker_name

    def consume_message_before(self, ctx: ConsumeContext) -> None:
        request_id = self.ids.next_id()
        now = int(time.time() * 1000)
        ctx.props["msg_trace"] = (request_id, time.perf_counter())
        for m in ctx.messages:
            keys = " ".join(m.keys)
            self._put({"type": "SubBefore", "timestamp": now, "regionId": self.region, "groupName": ctx.consumer_group,
                       "requestId": request_id, "msgId": m.msg_id, "retryTimes": m.reconsume_times, "keys": keys},
                      [m.msg_id, *m.keys])

    def consume_message_after(self, ctx: ConsumeContext) -> None:
        request_id, started = ctx.props.get("msg_trace", (self.ids.next_id(), time.perf_counter()))
        cost = int((time.perf_counter() - started) * 1000) // max(1, len(ctx.messages))
        # ConsumeReturnType as RocketMQ's ConsumeMessageTraceHookImpl reports it
        code = {"CONSUME_SUCCESS": "SUCCESS", "EXCEPTION": "EXCEPTION"}.get(ctx.status, "FAILED")
        now = int(time.time() * 1000)
        for m in ctx.messages:
            keys = " ".join(m.keys)
            self._put({"type": "SubAfter", "requestId": request_id, "msgId": m.msg_id, "costTime": cost,
                       "success": ctx.success, "keys": keys, "contextCode": code, "timestamp": now,
                       "groupName": ctx.consumer_group}, [m.msg_id, *m.keys])

    # ------------------------------------------------------------------ dispatch
    def _ensure_thread(self) -> None:
        if self._thread is not None or self._stop.is_set():
            return
        with self._lock:  # hooks run on the caller's and the consume pool's threads
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"msg-trace-{self.group}", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        started = False
        while not (self._stop.is_set() and self.queue.empty()):
            batch: list[tuple[str, list[str]]] = []
            deadline = time.monotonic() + self.flush_interval_s
            while len(batch) < self.batch_size:
                try:
                    batch.append(self.queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            if not batch:
                continue
            if not started:
                self.producer.start()
                started = True
            self._send(batch)
        if started:
            self.producer.shutdown()

    def _send(self, batch: list[tuple[str, list[str]]]) -> None:
        body = ""
        keys: list[str] = []
        for record, record_keys in batch:
            if body and len(body) + len(record) > MAX_BODY_BYTES:
                self._send_one(body, keys)
                body, keys = "", []
            body += record
            keys += [k for k in record_keys if k not in keys]
        if body:
            self._send_one(body, keys)

    def _send_one(self, body: str, keys: list[str]) -> None:
        try:
            self.producer.send(Message(self.trace_topic, body.encode(), keys=keys))
        except (ClientError, ConnectionError, TimeoutError, ValueError) as exc:
            log.warning("message trace of %s: a trace send failed, %d bytes dropped: %s", self.group, len(body), exc)

    def shutdown(self) -> None:
        """Send what is queued, then stop the dispatcher (and its inner producer)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def enable_msg_trace(client: Any, trace_topic: str = TRACE_TOPIC) -> MsgTracer:
    """RocketMQ's ``enableMsgTrace`` for a :class:`~broker_core.client.Producer` or
    :class:`~broker_core.client.PushConsumer` (register before ``start()``)."""
    tracer = MsgTracer(client.group, ";".join(client.instance.namesrv_addrs), trace_topic=trace_topic,
                       traced_instance=client.instance)
    if hasattr(client, "register_send_message_hook"):
        client.register_send_message_hook(tracer)
    else:
        client.register_consume_message_hook(tracer)
    return tracer
