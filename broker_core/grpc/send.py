"""SendMessage and EndTransaction over gRPC, into the same store, transaction service and timer as the
remoting path.

The server picks the queue (RocketMQ 5 clients send none): a message with a ``message_group`` goes to queue
``crc32(group) % writeQueueNums`` (so one group's messages stay in one queue, in send order), others round-robin.
A TRANSACTION message is a half message of producer group ``<topic>`` (``PGROUP``; the Telemetry stream is
registered under that group for the check-back). Every entry's ``transaction_id`` is the message id, as
RocketMQ's SendMessageProcessor answers; EndTransaction finds a half message by it (remembered at its send),
or by the half record's offset message id (what the check-back names; it decodes back to the record). A
``delivery_timestamp`` in the future goes to the timer (:mod:`broker_core.grpc.timer`); one in the past is
delivered at once.
"""

from __future__ import annotations

import itertools
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from broker_core.codec import CodecError
from broker_core.codec.message import (
    PROPERTY_CLUSTER,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
)
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.grpc import convert
from broker_core.grpc.convert import PROPERTY_TIMER_DELIVER_MS
from broker_core.grpc.stubs import pb, svc
from broker_core.protocol.fields import BadRequest
from broker_core.protocol.validation import topic_error
from broker_core.remoting.loops import within
from broker_core.server.transactions import HALF_TOPIC
from broker_core.store import MessageInner, PutMessageResult, PutStatus

if TYPE_CHECKING:
    from broker_core.grpc.timer import TimerService
    from broker_core.server.ports import Broker

MAX_REMEMBERED_HALVES = 65536  # EndTransaction by message id within this many half sends (else: offset id)

PUT_CODES = {
    PutStatus.PUT_OK: pb.OK,
    PutStatus.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: pb.MESSAGE_PROPERTIES_TOO_LARGE,
    PutStatus.OS_PAGECACHE_BUSY: pb.TOO_MANY_REQUESTS,
    PutStatus.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
}


class SendService:
    def __init__(self, ctl: Broker, timer: TimerService) -> None:
        self.ctl = ctl
        self.timer = timer
        self._round_robin = itertools.count()
        self._halves: OrderedDict[str, str] = OrderedDict()  # message id -> half record's offset msg id

    def _entry(self, code: int, message: str = "", **fields: Any) -> Any:
        return svc.SendResultEntry(status=convert.status(code, message), **fields)

    def _build(self, msg: Any, peer_host: str) -> tuple[MessageInner, int] | Any:
        """The record to put and its timer time (0: none), or the failed entry."""
        ctl = self.ctl
        sp = msg.system_properties
        topic = msg.topic.name
        if topic_error(topic):
            return self._entry(pb.ILLEGAL_TOPIC, topic_error(topic) or "")
        cfg = ctl.topics.get(topic)
        if cfg is None:
            return self._entry(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {ctl.config.broker_name}")
        if not cfg.writable or cfg.write_queue_nums <= 0:
            return self._entry(pb.FORBIDDEN, f"the topic {topic} does not accept sends (perm {cfg.perm})")
        if not sp.message_id:
            return self._entry(pb.ILLEGAL_MESSAGE_ID, "message id is empty")
        try:
            body = convert.body_of(msg)
            props = convert.record_properties(msg)
        except ValueError as exc:
            return self._entry(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, str(exc))
        except (OSError, EOFError) as exc:  # a GZIP body that does not inflate
            return self._entry(pb.MESSAGE_CORRUPTED, str(exc))
        if not body:
            return self._entry(pb.MESSAGE_BODY_EMPTY)
        if len(body) > ctl.store.max_message_size:
            return self._entry(pb.MESSAGE_BODY_TOO_LARGE,
                               f"body is {len(body)} bytes, maxMessageSize is {ctl.store.max_message_size}")
        group = sp.message_group if sp.HasField("message_group") else ""
        if group:
            queue_id = zlib.crc32(group.encode()) % cfg.write_queue_nums
        else:
            queue_id = next(self._round_robin) % cfg.write_queue_nums
        props[PROPERTY_CLUSTER] = ctl.config.broker_cluster_name
        deliver_ms = int(props.get(PROPERTY_TIMER_DELIVER_MS, "0"))
        max_delay_ms = ctl.config.timer.timer_max_delay_sec * 1000
        if deliver_ms - ctl.store.clock.now_ms() > max_delay_ms:  # the broker's timerMaxDelaySec, as over remoting
            return self._entry(pb.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is "
                                                         f"{max_delay_ms}")
        transactional = sp.message_type == pb.TRANSACTION
        if transactional:
            if ctl.config.reject_transaction_message:
                return self._entry(pb.FORBIDDEN, f"the broker {ctl.config.broker_name} refuses transaction messages")
            props[PROPERTY_TRANSACTION_PREPARED] = "true"
            props[PROPERTY_PRODUCER_GROUP] = topic
        born_ms = convert.millis(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
        inner = MessageInner(topic, body, queue_id, properties=props, born_timestamp=born_ms,
                             born_host=convert.born_host(msg, peer_host))
        if transactional:
            ctl.transactions.prepare(inner)
        elif deliver_ms > ctl.store.clock.now_ms():
            self.timer.hold(inner, deliver_ms)
        else:
            deliver_ms = 0
        return inner, deliver_ms

    async def send(self, request: Any, peer_host: str) -> Any:
        ctl = self.ctl
        entries: list[Any] = []
        for msg in request.messages:
            built = self._build(msg, peer_host)
            if not isinstance(built, tuple):
                built.message_id = msg.system_properties.message_id
                entries.append(built)
                continue
            inner, deliver_ms = built
            refusal = ctl.ha.put_refusal() if ctl.replicas is not None else None
            if refusal is not None:  # controller mode: fewer in-sync replicas than minInSyncReplicas
                entries.append(self._entry(pb.INTERNAL_SERVER_ERROR, refusal,
                                           message_id=msg.system_properties.message_id))
                continue
            results, flush = ctl.store.put_messages_nowait([inner])
            r: PutMessageResult = results[0]
            if flush is not None and r.ok:
                try:
                    flushed = await within(flush.future(), ctl.config.flush.sync_flush_timeout_ms / 1000)
                except TimeoutError:
                    flushed = False
                if not flushed:
                    r.status = PutStatus.FLUSH_DISK_FAILED if flush.error else PutStatus.FLUSH_DISK_TIMEOUT
            if r.ok and ctl.replicas is not None and ctl.ha.sync_master:  # controller mode: the SyncStateSet's acks
                r.status = await ctl.ha.wait_replicated(r.phy_offset + r.size)
            message_id = msg.system_properties.message_id
            if not r.ok:
                code = PUT_CODES.get(r.status, pb.INTERNAL_SERVER_ERROR)
                entries.append(self._entry(code, r.error or r.status.name, message_id=message_id))
                continue
            ctl.stats.put_count += 1
            if deliver_ms and inner.topic != HALF_TOPIC:
                self.timer.held(deliver_ms, r.queue_offset)
            entries.append(self._entry(pb.OK, message_id=message_id, offset=r.queue_offset,
                                       transaction_id=message_id))
            if inner.topic == HALF_TOPIC:
                self._halves[message_id] = r.msg_id
                while len(self._halves) > MAX_REMEMBERED_HALVES:
                    self._halves.popitem(last=False)
        code = convert.worst(e.status.code for e in entries)
        return svc.SendMessageResponse(status=convert.status(code, entries[0].status.message if len(entries) == 1
                                                             else ""), entries=entries)

    def end_transaction(self, request: Any) -> Any:
        """COMMIT or ROLLBACK the half message named by ``transaction_id`` (idempotent, as the remoting path)."""
        ctl = self.ctl
        try:
            _, _, phy_offset = decode_offset_msg_id(self._halves.get(request.transaction_id,
                                                                     request.transaction_id))
        except (ValueError, CodecError):
            return svc.EndTransactionResponse(status=convert.status(pb.INVALID_TRANSACTION_ID,
                                                                    "transaction id is not one this broker issued"))
        rec = ctl.store.look_message_by_offset(phy_offset)
        if rec is None or rec.topic != HALF_TOPIC or (request.message_id and rec.uniq_key != request.message_id):
            return svc.EndTransactionResponse(status=convert.status(pb.INVALID_TRANSACTION_ID,
                                                                    "no half message with this transaction id"))
        if request.resolution not in (pb.COMMIT, pb.ROLLBACK):
            return svc.EndTransactionResponse(status=convert.status(pb.OK, "left for the check-back"))
        try:
            outcome = ctl.transactions.end(rec.queue_offset, request.resolution == pb.COMMIT)
        except BadRequest as exc:
            return svc.EndTransactionResponse(status=convert.status(pb.INVALID_TRANSACTION_ID, str(exc)))
        return svc.EndTransactionResponse(status=convert.status(pb.OK, outcome))
