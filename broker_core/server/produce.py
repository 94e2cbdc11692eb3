"""SEND_MESSAGE (10, V1 header), SEND_MESSAGE_V2 (310, single-letter header) and SEND_BATCH_MESSAGE (320),
as RocketMQ 4.9's ``SendMessageProcessor``: the three codes share one path, and only the header's ``batch``
flag selects the batch layout (a 320 without it is one message whose body is the raw bytes)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker_core.codec import CodecError
from broker_core.codec.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
    decode_properties,
    encode_properties,
    host_to_bytes,
)
from broker_core.codec.names import PROPERTY_TIMER_DELIVER_MS, SCHEDULE_TOPIC, TIMER_TOPIC
from broker_core.codec.wire import decode_batch
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.command import V3_4_9
from broker_core.protocol.fields import BadRequest, bool_field, int_field, str_field
from broker_core.protocol.headers import send_header
from broker_core.protocol.validation import RETRY_GROUP_TOPIC_PREFIX, TRANS_HALF_TOPIC, dlq_topic, topic_error
from broker_core.remoting.loops import within
from broker_core.remoting.server import Connection, Handler
from broker_core.server.retry import ensure_topic
from broker_core.server.send_fast import Lane, make_lane, make_single_v2
from broker_core.server.state import TopicConfig
from broker_core.store import BatchPutResult, GroupCommitRequest, MessageInner, PutMessageResult, PutStatus

if TYPE_CHECKING:
    from broker_core.server.ports import Broker
    from broker_core.server.transactions import TransactionService

STATUS_TO_CODE = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_DISK_FAILED: ResponseCode.SYSTEM_ERROR,  # an fsync failed: not stored durably; the remark says
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.CREATE_MAPEDFILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}


def writable_topic(ctl: Broker, cmd: RemotingCommand, topic: str,
                   default_queue_nums: int | None = None) -> TopicConfig | RemotingCommand:
    err = topic_error(topic)
    if err:  # RocketMQ answers a topic that fails TopicValidator with SYSTEM_ERROR
        return cmd.response(ResponseCode.SYSTEM_ERROR, err)
    cfg = ctl.topics.get(topic)
    if cfg is None:
        if not ctl.config.auto_create_topic_enable:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"topic[{topic}] not exist on broker {ctl.config.broker_name}, apply first please! "
                                "(autoCreateTopicEnable is off)")
        n = ctl.config.default_topic_queue_nums
        if default_queue_nums is not None and default_queue_nums > 0:
            n = min(n, default_queue_nums)
        cfg = TopicConfig(topic, n, n, auto_created=True)
        ctl.topics.upsert(cfg)
        ctl.spawn(ctl.register_all())
    if not cfg.writable:
        return cmd.response(ResponseCode.NO_PERMISSION,
                            f"the topic[{topic}] sending is forbidden (perm {cfg.perm})")
    return cfg


async def _flushed(ctl: Broker, request: GroupCommitRequest) -> bool:
    """Whether the group commit ``request`` completed within ``syncFlushTimeout``."""
    try:
        return await within(request.future(), ctl.config.flush.sync_flush_timeout_ms / 1000)
    except TimeoutError:
        return False


async def _after_flush(ctl: Broker, request: GroupCommitRequest, results: list[PutMessageResult],
                       respond: Callable[[], RemotingCommand]) -> RemotingCommand:
    """SYNC_FLUSH: answer once the group commit covering ``results`` is done (or timed out, or failed)."""
    if not await _flushed(ctl, request):
        status = PutStatus.FLUSH_DISK_FAILED if request.error else PutStatus.FLUSH_DISK_TIMEOUT
        for r in results:
            if r.ok:
                r.status, r.error = status, request.error
    return respond()


# RocketMQ's remark for a put refused as SERVICE_NOT_AVAILABLE (here: the broker is a slave)
SLAVE_REMARK = ("service not available now. It may be caused by one of the following reasons: the broker's disk is "
                "full, messages are put to the slave, message store has been shut down, etc.")
_NO_WAIT = PROPERTY_WAIT_STORE_MSG_OK + "\x01false"


def _wants_replica(ctl: Broker, cmd: RemotingCommand, end: int) -> bool:
    """SYNC_MASTER waits for a slave unless the message says ``WAIT=false`` (upstream ``isWaitStoreMsgOK``)."""
    return end > 0 and ctl.ha.sync_master and _NO_WAIT not in (send_header(cmd).get("properties") or "")


async def _after_replica(ctl: Broker, request: GroupCommitRequest | None, end: int,
                         mark: Callable[[PutStatus, str], None]) -> None:
    """SYNC_MASTER: the disk flush first (SYNC_FLUSH), then a slave's ack of the CommitLog up to ``end``; a
    missed one marks the stored results FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE."""
    if request is not None and not await _flushed(ctl, request):
        mark(PutStatus.FLUSH_DISK_FAILED if request.error else PutStatus.FLUSH_DISK_TIMEOUT, request.error)
        return
    status = await ctl.ha.wait_replicated(end)
    if status is not PutStatus.PUT_OK:
        mark(status, "")


def trace_stored(ctl: Broker, msgs: list[MessageInner], results: list[PutMessageResult], group: object,
                 started: float) -> None:
    cost = (time.perf_counter() - started) * 1000
    events = []
    for m, r in zip(msgs, results, strict=True):
        if not r.ok:
            continue
        props = m.properties
        delayed = m.topic == SCHEDULE_TOPIC
        topic = props.get(PROPERTY_REAL_TOPIC, m.topic)
        events.append(ctl.tracer.event(
            "delayed" if delayed else "stored", m.uniq_key or r.msg_id, topic, group=str(group),
            keys=(m.keys or "").split(), cost_ms=cost, queue_id=m.queue_id, queue_offset=r.queue_offset,
            reconsume_times=m.reconsume_times, status="half" if m.topic == TRANS_HALF_TOPIC else "ok",
            timestamp=r.store_timestamp, **({"delayLevel": m.delay_level} if delayed else {})))
    ctl.tracer.emit(events)


def target_queue(ctl: Broker, cmd: RemotingCommand, h: dict[str, str]) -> tuple[str, int] | RemotingCommand:
    """The topic and queue a send writes to (``queueId`` < 0: a random writable queue), or the error response."""
    topic = str_field(h, "topic")
    cfg = writable_topic(ctl, cmd, topic, int_field(h, "defaultTopicQueueNums", 0))
    if isinstance(cfg, RemotingCommand):
        return cfg
    queue_id = int_field(h, "queueId", -1)
    if queue_id < 0:
        queue_id = random.randrange(cfg.write_queue_nums) if cfg.write_queue_nums > 0 else 0
    if queue_id >= max(cfg.write_queue_nums, cfg.read_queue_nums):
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"request queueId[{queue_id}] is illegal, topic {topic} has "
                            f"{cfg.write_queue_nums} write queues")
    return topic, queue_id


def _born(conn: Connection) -> tuple[str, int]:
    host, _, port = conn.remote.rpartition(":")
    return host, int(port) if port.isdigit() else 0


def _store_properties(ctl: Broker, props: dict[str, str]) -> dict[str, str]:
    """What the broker adds and drops before storing: ``CLUSTER`` in, ``WAIT`` out (RocketMQ 4.9.1+)."""
    props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
    props[PROPERTY_CLUSTER] = ctl.config.broker_cluster_name
    return props


def _to_dead_letter(ctl: Broker, cmd: RemotingCommand, h: dict[str, str], msg: MessageInner) -> None:
    """A send to ``%RETRY%<group>`` past ``maxReconsumeTimes`` goes to ``%DLQ%<group>`` queue 0 instead."""
    group = msg.topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    max_times = ctl.groups.get_or_create(group).retry_max_times
    if cmd.version >= V3_4_9:
        max_times = int_field(h, "maxReconsumeTimes", max_times)
    if msg.reconsume_times >= max_times:
        dlq = dlq_topic(group)
        ensure_topic(ctl, dlq)
        msg.topic, msg.topic_bytes, msg.queue_id = dlq, dlq.encode(), 0
        msg.replace_properties(msg.properties)


def _send_response(ctl: Broker, cmd: RemotingCommand, results: list[PutMessageResult],
                   queue_id: int) -> RemotingCommand:
    """RocketMQ's send response: ``msgId`` the offset message id (a batch: the ids joined by commas),
    ``queueId``, ``queueOffset`` (a batch: the first), and the ``MSG_REGION``/``TRACE_ON`` fields Java
    clients read unconditionally."""
    worst = next((r for r in results if not r.ok), results[0])
    code = STATUS_TO_CODE[worst.status]
    stored = [r for r in results if r.phy_offset >= 0]
    if not stored:
        return cmd.response(code, worst.error or worst.status.name)
    return cmd.response(code, worst.error, {
        "msgId": ",".join(r.msg_id for r in stored), "queueId": str(queue_id),
        "queueOffset": str(stored[0].queue_offset), "MSG_REGION": ctl.config.region_id,
        "TRACE_ON": "true" if ctl.config.trace_on else "false"})


@dataclass(slots=True)
class BatchRequest:
    """A SEND_BATCH_MESSAGE that passed the header checks, to be stored from its bytes."""

    topic: str
    queue_id: int
    extra: bytes  # the broker's properties (CLUSTER) appended to every entry's
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    born_port: int
    reconsume_times: int


def _batch_response(ctl: Broker, cmd: RemotingCommand, result: BatchPutResult,
                    queue_id: int) -> RemotingCommand:
    """As :func:`_send_response` for a batch: the stored records' offset message ids joined by commas and the
    first queue offset; a refused batch answers with its status and reason."""
    code = STATUS_TO_CODE[result.status]
    if not result.phys:
        return cmd.response(code, result.error or result.status.name)
    return cmd.response(code, result.error, {
        "msgId": result.msg_ids, "queueId": str(queue_id), "queueOffset": str(result.first_queue_offset),
        "MSG_REGION": ctl.config.region_id, "TRACE_ON": "true" if ctl.config.trace_on else "false"})


async def _after_batch_flush(ctl: Broker, request: GroupCommitRequest, result: BatchPutResult,
                             respond: Callable[[], RemotingCommand]) -> RemotingCommand:
    """SYNC_FLUSH for a batch: answer once the group commit covering it is done (or timed out, or failed)."""
    if not await _flushed(ctl, request) and result.ok:
        result.status = PutStatus.FLUSH_DISK_FAILED if request.error else PutStatus.FLUSH_DISK_TIMEOUT
        result.error = request.error
    return respond()


async def _replica_then(wait: Awaitable[None], respond: Callable[[], RemotingCommand]) -> RemotingCommand:
    await wait
    return respond()


class TimerPort(Protocol):
    """The broker's timer (``broker_core.grpc.timer.TimerService``), as a remoting send uses it."""

    def accept(self, msg: MessageInner) -> int: ...

    def held(self, deliver_ms: int, queue_offset: int) -> None: ...


class SendMessageProcessor:
    """SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE."""

    def __init__(self, ctl: Broker, transactions: TransactionService, timer: TimerPort | None = None) -> None:
        self.ctl = ctl
        self.transactions = transactions
        self.timer = timer  # RocketMQ 5 timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)
        self.lane: Lane | None = None  # the send lane for the RemotingServer (send_fast.make_lane), from handlers()

    def handlers(self) -> dict[int, Handler]:
        ctl, transactions, timer = self.ctl, self.transactions, self.timer
        Parsed = tuple[dict[str, str], list[MessageInner], int]

        def parse(cmd: RemotingCommand, conn: Connection) -> Parsed | BatchRequest | RemotingCommand:
            """The request's messages, or the error response. Only the ``batch`` flag selects the batch path."""
            h = send_header(cmd)
            target = target_queue(ctl, cmd, h)
            if isinstance(target, RemotingCommand):
                return target
            topic, queue_id = target
            host, port = _born(conn)
            sys_flag = int_field(h, "sysFlag", 0)
            born_ts = int_field(h, "bornTimestamp", 0)
            reconsume = int_field(h, "reconsumeTimes", 0)
            header_props = decode_properties(h.get("properties", ""))
            if not bool_field(h, "batch"):
                props = _store_properties(ctl, header_props)
                msg = MessageInner(topic, cmd.body, queue_id, properties=props, flag=int_field(h, "flag", 0),
                                   sys_flag=sys_flag, born_timestamp=born_ts, born_host=host, born_port=port,
                                   reconsume_times=reconsume)
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    _to_dead_letter(ctl, cmd, h, msg)
                if (props.get(PROPERTY_TRANSACTION_PREPARED) == "true"
                        or sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE):
                    if ctl.config.reject_transaction_message:
                        return cmd.response(ResponseCode.NO_PERMISSION, f"the broker[{ctl.config.broker_name}] "
                                            "sending transaction message is forbidden")
                    transactions.prepare(msg)
                elif timer is not None:
                    timer.accept(msg)  # a time to come: a timer record (BadRequest: MESSAGE_ILLEGAL, too far)
                return h, [msg], queue_id
            if sys_flag & TRANSACTION_TYPE_MASK:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "batch request does not support transaction message")
            if int(header_props.get(PROPERTY_DELAY_TIME_LEVEL, "0") or 0) > 0:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "batch request does not support delay message")
            if not ctl.tracer.enabled:  # stored from the batch bytes; tracing needs a message object each
                return BatchRequest(topic, queue_id, encode_properties(_store_properties(ctl, header_props)),
                                    sys_flag, born_ts, host_to_bytes(host), port, reconsume)
            entries = decode_batch(cmd.body)
            if not entries:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
            extra = _store_properties(ctl, header_props)
            extra_b = encode_properties(extra)
            host_b = host_to_bytes(host)
            msgs = []
            for flag, body, props_b in entries:
                # as RocketMQ: the entry's own properties, a separator if it does not end with one, then the
                # header's properties (with CLUSTER) appended as bytes, without re-encoding the entry's
                joined = props_b + extra_b if not props_b or props_b.endswith(b"\x02") else props_b + b"\x02" + extra_b
                msgs.append(MessageInner.from_encoded(
                    topic, body, queue_id, joined, {**decode_properties(props_b), **extra}, flag=flag,
                    sys_flag=sys_flag, born_timestamp=born_ts, born_host=host_b, born_port=port,
                    reconsume_times=reconsume))
            return h, msgs, queue_id

        def send_batch(cmd: RemotingCommand, b: BatchRequest) -> RemotingCommand | Awaitable[RemotingCommand]:
            """A batch stored from its bytes (MessageStore.put_batch_nowait): one record per entry, all or none."""
            if len(cmd.body) > ctl.store.max_message_size:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"the batch body is {len(cmd.body)} bytes, "
                                    f"maxMessageSize is {ctl.store.max_message_size}")
            result, request = ctl.store.put_batch_nowait(
                b.topic, b.queue_id, cmd.body, b.extra, sys_flag=b.sys_flag, born_timestamp=b.born_timestamp,
                born_host=b.born_host, born_port=b.born_port, reconsume_times=b.reconsume_times)

            def respond() -> RemotingCommand:
                ctl.stats.put_count += len(result.phys)
                return _batch_response(ctl, cmd, result, b.queue_id)

            if result.ok and _wants_replica(ctl, cmd, result.end_offset):
                def mark(status: PutStatus, error: str) -> None:
                    result.status, result.error = status, error

                return _replica_then(_after_replica(ctl, request, result.end_offset, mark), respond)
            return respond() if request is None else _after_batch_flush(ctl, request, result, respond)

        valid_names: dict[str, bool] = {}  # topic names found valid, shared by the fast path and the lane
        single_v2 = make_single_v2(ctl, _send_response, _born, valid_names)
        self.lane = make_lane(ctl, valid_names)

        def send(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | bytes | Awaitable[RemotingCommand]:
            if ctl.ha.is_slave:  # before anything, so a slave never auto-creates a topic
                return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_REMARK)
            if ctl.replicas is not None and (refusal := ctl.ha.put_refusal()) is not None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, refusal)  # minInSyncReplicas (controller mode)
            h = cmd.header
            if cmd.code == RequestCode.SEND_MESSAGE_V2 and "b" in h and not ctl.tracer.enabled:
                try:
                    fast = single_v2(cmd, conn, h)
                except (BadRequest, CodecError, UnicodeDecodeError) as exc:
                    return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
                if fast is not None:
                    return fast
            try:
                parsed = parse(cmd, conn)
            except (BadRequest, CodecError, UnicodeDecodeError) as exc:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
            if isinstance(parsed, RemotingCommand):
                return parsed
            if isinstance(parsed, BatchRequest):
                return send_batch(cmd, parsed)
            h, msgs, queue_id = parsed
            if len(msgs) > 1 or bool_field(h, "batch"):
                if len(cmd.body) > ctl.store.max_message_size:
                    return cmd.response(ResponseCode.SYSTEM_ERROR,
                                        f"the batch body is {len(cmd.body)} bytes, maxMessageSize is "
                                        f"{ctl.store.max_message_size}")
                for i, m in enumerate(msgs):  # all or nothing: refuse the batch before writing anything
                    refused = ctl.store.check_message(m) if m.limits_error else None
                    if refused is not None:
                        return cmd.response(STATUS_TO_CODE[refused.status],
                                            f"message {i} of the batch: {refused.error}")
            started = time.perf_counter()
            results, request = ctl.store.put_messages_nowait(msgs)
            if timer is not None and msgs[0].topic == TIMER_TOPIC and results[0].ok:
                timer.held(int(msgs[0].properties[PROPERTY_TIMER_DELIVER_MS]), results[0].queue_offset)

            def respond() -> RemotingCommand:
                ok = [r for r in results if r.ok]
                ctl.stats.put_count += len(ok)
                if ok and ctl.tracer.enabled:
                    trace_stored(ctl, msgs, results, h.get("producerGroup", ""), started)
                return _send_response(ctl, cmd, results, queue_id)

            end = max((r.phy_offset + r.size for r in results if r.ok), default=-1)
            if _wants_replica(ctl, cmd, end):
                def mark(status: PutStatus, error: str) -> None:
                    for r in results:
                        if r.ok:
                            r.status, r.error = status, error

                return _replica_then(_after_replica(ctl, request, end, mark), respond)
            return respond() if request is None else _after_flush(ctl, request, results, respond)

        send = ctl.fast_failure.guard(send)  # type: ignore[assignment]  # same call shape, may answer later
        return {RequestCode.SEND_MESSAGE: send, RequestCode.SEND_MESSAGE_V2: send,
                RequestCode.SEND_BATCH_MESSAGE: send}
