"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over the broker's
receive/ack service (:class:`broker_core.server.pop.PopService`, the REST path's, durable), so gRPC consumers
and REST/remoting receivers of a group share one in-flight state, one committed offset per queue and one DLQ
(``%DLQ%<group>``), and a receipt handle issued here is the same string the REST API issues.

- A receive hands out up to ``batch_size`` messages invisible for ``invisible_duration`` (30 s when the client
  sends none: a PushConsumer, which acks or nacks itself), waiting up to ``long_polling_timeout`` (20 s by
  default, at most 30 s and never past the call's deadline) for one to arrive. The answer stream is
  ``status``, one ``message`` each, ``delivery_timestamp``, as the proxy writes it; an empty one is
  ``MESSAGE_NOT_FOUND``.
- A FIFO group (``consumeMessageOrderly``) receives a queue's messages only when none of that queue's is in
  flight (``PopService.pop(fifo=True)``): each message group, hashed to one queue, is consumed in order.
- A message not acked in time comes back with ``delivery_attempt`` + 1; past the group's ``retryMaxTimes`` + 1
  attempts it goes to ``%DLQ%<group>`` (PopService's revive). ForwardMessageToDeadLetterQueue (the FIFO
  PushConsumer after its local retries) puts it there at once and finishes its delivery.
- With SYNC_FLUSH the receive/ack journal is fsynced before each answer (pop_state's crash behaviour).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from broker_core.codec.message import decode_record
from broker_core.codec.names import PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_DLQ_REASON, PROPERTY_DLQ_TIMESTAMP
from broker_core.grpc import convert
from broker_core.grpc.renew import Renewals
from broker_core.grpc.stubs import pb, svc
from broker_core.protocol.fields import BadRequest
from broker_core.protocol.filter import EXPRESSION_SQL92, EXPRESSION_TAG, SubscriptionParseError, parse_subscription
from broker_core.protocol.validation import dlq_topic, group_error
from broker_core.server.consume import trace_delivered
from broker_core.server.pop import MAX_INVISIBLE_MS, HandleError
from broker_core.server.retry import ensure_topic
from broker_core.store import GetStatus, MessageInner

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

DEFAULT_INVISIBLE_MS = 30_000
DEFAULT_POLL_MS = 20_000
MAX_POLL_MS = 30_000


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReceiveService:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.pop = ctl.pop_service
        self.renewals = Renewals(self.pop, ctl.config.grpc)  # push consumers' invisible time (auto_renew)

    async def _durable(self) -> None:
        if self.pop.state.sync_each:
            await asyncio.get_running_loop().run_in_executor(None, self.pop.state.sync)

    async def receive(self, request: Any, time_remaining: float | None, client_id: str = "") -> AsyncIterator[Any]:
        """As the proxy's ReceiveMessageActivity: every queue of this broker (the broker the message queue names;
        the proxy pops that broker's acting queue -1, whatever the queue id); with ``auto_renew`` (push
        consumers) the messages are invisible for ``defaultInvisibleTimeMills`` and renewed (renew.py)."""
        ctl = self.ctl
        group, topic = request.group.name, request.message_queue.topic.name
        err = group_error(group)
        if err:
            yield svc.ReceiveMessageResponse(status=convert.status(pb.ILLEGAL_CONSUMER_GROUP, err))
            return
        cfg = ctl.topics.get(topic)
        if cfg is None:
            yield svc.ReceiveMessageResponse(status=convert.status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist"))
            return
        fe = request.filter_expression
        kind = EXPRESSION_SQL92 if fe.type == pb.SQL else EXPRESSION_TAG
        if kind == EXPRESSION_SQL92 and not ctl.config.enable_property_filter:
            yield svc.ReceiveMessageResponse(status=convert.status(
                pb.ILLEGAL_FILTER_EXPRESSION, "the broker does not filter by SQL92 (enablePropertyFilter=false)"))
            return
        try:
            sub = parse_subscription(topic, fe.expression or "*", kind)
        except SubscriptionParseError as exc:
            yield svc.ReceiveMessageResponse(status=convert.status(pb.ILLEGAL_FILTER_EXPRESSION, str(exc)))
            return
        invisible = convert.duration_ms(request.invisible_duration, DEFAULT_INVISIBLE_MS) \
            if request.HasField("invisible_duration") else DEFAULT_INVISIBLE_MS
        renew = request.auto_renew and ctl.config.grpc.enable_proxy_auto_renew
        if renew:
            invisible = ctl.config.grpc.default_invisible_time_ms
        elif not 1000 <= invisible <= MAX_INVISIBLE_MS:
            yield svc.ReceiveMessageResponse(status=convert.status(
                pb.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be 1 s..12 h, got {invisible} ms"))
            return
        poll_ms = convert.duration_ms(request.long_polling_timeout, DEFAULT_POLL_MS) \
            if request.HasField("long_polling_timeout") else DEFAULT_POLL_MS
        poll_s = min(poll_ms, MAX_POLL_MS) / 1000
        if time_remaining is not None:
            poll_s = min(poll_s, max(0.0, time_remaining - 1.0))
        settings = ctl.groups.get_or_create(group)
        batch = max(1, min(request.batch_size or 32, 256))

        def attempt() -> tuple[list[bytes], list[dict[str, object]]]:
            got = self.pop.pop(group, topic, batch, invisible, sub, settings.retry_max_times,
                               fifo=settings.consume_message_orderly)
            return got.records, got.meta

        records, meta = attempt()
        deadline = time.monotonic() + poll_s
        keys = [(topic, q) for q in range(cfg.read_queue_nums)]
        while not records and ctl.hold is not None and time.monotonic() < deadline:
            await ctl.hold.wait_any(keys, min(deadline - time.monotonic(), 1.0))  # re-checks deadlines each second
            records, meta = attempt()
        await self._durable()
        if not records:
            yield svc.ReceiveMessageResponse(status=convert.status(pb.MESSAGE_NOT_FOUND, "no new message"))
        else:
            ctl.stats.get_count += len(meta)
            if ctl.tracer.enabled:
                trace_delivered(ctl, b"".join(records), group)
            yield svc.ReceiveMessageResponse(status=convert.status(pb.OK))
            raw, pos = b"".join(records), 0  # runs of whole records; ``meta`` has one entry per record
            for info in meta:
                rec = decode_record(raw, pos, check_crc=False)
                pos += rec.store_size
                attempt_no = int(str(info["reconsumeTimes"])) + 1
                handle = str(info["handle"])
                if renew:
                    self.renewals.add(client_id, group, handle, int(handle.rsplit("|", 1)[1]))
                yield svc.ReceiveMessageResponse(message=convert.to_pb(
                    rec, topic, receipt_handle=handle, invisible_ms=invisible, attempt=attempt_no))
        ts = svc.ReceiveMessageResponse()
        convert.set_millis(ts.delivery_timestamp, _now_ms())
        yield ts

    async def ack(self, request: Any) -> Any:
        group = request.group.name
        entries = []
        for e in request.entries:
            try:
                self.pop.ack(group, self.renewals.take(group, e.receipt_handle))
                st = convert.status(pb.OK)
            except (HandleError, BadRequest) as exc:
                st = convert.status(pb.INVALID_RECEIPT_HANDLE, str(exc))
            entries.append(svc.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle,
                                                     status=st))
        await self._durable()
        code = convert.worst(e.status.code for e in entries)
        return svc.AckMessageResponse(status=convert.status(code, entries[0].status.message if len(entries) == 1
                                                            else ""), entries=entries)

    async def change_invisible(self, request: Any) -> Any:
        ms = convert.duration_ms(request.invisible_duration, 0)
        if not 0 <= ms <= MAX_INVISIBLE_MS:
            return svc.ChangeInvisibleDurationResponse(status=convert.status(
                pb.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be 0..12 h, got {ms} ms"))
        try:
            handle = self.pop.change_invisible(request.group.name,
                                               self.renewals.take(request.group.name, request.receipt_handle), ms)
        except (HandleError, BadRequest) as exc:
            return svc.ChangeInvisibleDurationResponse(status=convert.status(pb.INVALID_RECEIPT_HANDLE, str(exc)))
        await self._durable()
        return svc.ChangeInvisibleDurationResponse(status=convert.status(pb.OK), receipt_handle=handle)

    async def forward_to_dlq(self, request: Any) -> Any:
        """The message of ``receipt_handle`` to ``%DLQ%<group>`` (with the DLQ properties the revive path
        writes), then its delivery finished as an ack."""
        ctl, group = self.ctl, request.group.name
        current = self.renewals.take(group, request.receipt_handle)
        try:
            topic, queue_id, offset, _ = self.pop.parse_handle(current)
        except BadRequest as exc:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=convert.status(pb.INVALID_RECEIPT_HANDLE,
                                                                                     str(exc)))
        res = ctl.store.get_message(topic, queue_id, offset, 1)
        if res.status is not GetStatus.FOUND or res.queue_offsets[0] != offset:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=convert.status(
                pb.MESSAGE_NOT_FOUND, "the message is gone from the store"))
        rec = res.messages[0]
        props = dict(rec.properties)
        props[PROPERTY_DLQ_ORIGIN_TOPIC] = topic
        props[PROPERTY_DLQ_REASON] = (f"forwarded by the consumer after {request.delivery_attempt} deliveries "
                                      f"(max {request.max_delivery_attempts})")
        props[PROPERTY_DLQ_TIMESTAMP] = str(ctl.store.clock.now_ms())
        dlq = dlq_topic(group)
        ensure_topic(ctl, dlq)
        r = ctl.store.put_messages([MessageInner(dlq, rec.body, 0, properties=props, flag=rec.flag,
                                                 sys_flag=rec.sys_flag,
                                                 reconsume_times=max(0, request.delivery_attempt - 1))])[0]
        if not r.ok:  # still in flight: it comes back after its invisible time
            return svc.ForwardMessageToDeadLetterQueueResponse(status=convert.status(
                pb.INTERNAL_SERVER_ERROR, f"DLQ put failed: {r.status.name}"))
        try:  # put first, then finished: a crash between the two redelivers, never loses (at least once)
            self.pop.ack(group, current)
        except (HandleError, BadRequest) as exc:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=convert.status(pb.INVALID_RECEIPT_HANDLE,
                                                                                     str(exc)))
        await self._durable()
        return svc.ForwardMessageToDeadLetterQueueResponse(status=convert.status(pb.OK))
