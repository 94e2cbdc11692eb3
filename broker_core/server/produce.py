"""SEND_MESSAGE and SEND_BATCH_MESSAGE."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker_core.codec import CodecError
from broker_core.codec.message import (
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    decode_properties,
    host_to_bytes,
)
from broker_core.codec.wire import decode_batch
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import BadRequest, int_field, str_field
from broker_core.protocol.validation import TRANS_HALF_TOPIC, topic_error
from broker_core.remoting.server import Connection
from broker_core.server.state import TopicConfig
from broker_core.store import PutStatus
from broker_core.store.message import MessageInner
from broker_core.store.results import PutMessageResult
from broker_core.store.schedule import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from broker_core.server.controller import BrokerController

STATUS_TO_CODE = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.CREATE_MAPEDFILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}


def writable_topic(ctl: BrokerController, cmd: RemotingCommand, topic: str) -> TopicConfig | RemotingCommand:
    err = topic_error(topic)
    if err:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, err)
    cfg = ctl.topics.get(topic)
    if cfg is None:
        if not ctl.config.auto_create_topic_enable:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"topic {topic} does not exist on broker {ctl.config.broker_name} "
                                "(autoCreateTopicEnable is off)")
        n = ctl.config.default_topic_queue_nums
        cfg = TopicConfig(topic, n, n)
        ctl.topics.upsert(cfg)
        ctl.spawn(ctl.register_all())
    if not cfg.writable:
        return cmd.response(ResponseCode.NO_PERMISSION, f"topic {topic} is not writable (perm {cfg.perm})")
    return cfg


async def _after_flush(ctl: BrokerController, request, results: list[PutMessageResult],  # type: ignore[no-untyped-def]
                       respond: Callable[[], RemotingCommand]) -> RemotingCommand:
    """SYNC_FLUSH: answer once the group commit covering ``results`` is done (or timed out)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    request.add_done_callback(lambda ok: loop.call_soon_threadsafe(fut.set_result, ok))
    try:
        ok = await asyncio.wait_for(fut, ctl.config.sync_flush_timeout_ms / 1000)
    except TimeoutError:
        ok = False
    if not ok:
        for r in results:
            if r.ok:
                r.status = PutStatus.FLUSH_DISK_TIMEOUT
    return respond()


def trace_stored(ctl: BrokerController, msgs: list[MessageInner], results: list[PutMessageResult], group: object,
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


def target_queue(ctl: BrokerController, cmd: RemotingCommand) -> tuple[str, int] | RemotingCommand:
    """The topic and queue a send writes to, or the error response."""
    topic = str_field(cmd.header, "topic")
    cfg = writable_topic(ctl, cmd, topic)
    if isinstance(cfg, RemotingCommand):
        return cfg
    queue_id = int_field(cmd.header, "queueId", 0)
    if not 0 <= queue_id < cfg.write_queue_nums:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL,
                            f"queueId {queue_id} is outside 0..{cfg.write_queue_nums - 1} of topic {topic}")
    return topic, queue_id


def _born(conn: Connection) -> tuple[str, int]:
    host, _, port = conn.remote.rpartition(":")
    return host, int(port) if port.isdigit() else 0


def handlers(ctl: BrokerController) -> dict[int, object]:
    def send_message(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = cmd.header
        try:
            target = target_queue(ctl, cmd)
            if isinstance(target, RemotingCommand):
                return target
            topic, queue_id = target
            props = decode_properties(str(h.get("properties", "")))
            host, port = _born(conn)
            msg = MessageInner(topic, cmd.body, queue_id, properties=props, flag=int_field(h, "flag", 0),
                               sys_flag=int_field(h, "sysFlag", 0), born_timestamp=int_field(h, "bornTimestamp", 0),
                               born_host=host, born_port=port, reconsume_times=int_field(h, "reconsumeTimes", 0))
        except (BadRequest, UnicodeDecodeError) as exc:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        if props.get(PROPERTY_TRANSACTION_PREPARED) == "true" and ctl.transactions is not None:
            ctl.transactions.prepare(msg)  # type: ignore[attr-defined]
        started = time.perf_counter()
        results, request = ctl.store.put_messages_nowait([msg])

        def respond() -> RemotingCommand:
            r = results[0]
            ctl.stats.put_count += 1 if r.ok else 0
            if r.ok and ctl.tracer.enabled:
                trace_stored(ctl, [msg], [r], h.get("producerGroup", ""), started)
            code = STATUS_TO_CODE[r.status]
            if r.phy_offset < 0:
                return cmd.response(code, r.error or r.status.name)
            return cmd.response(code, r.error, {"msgId": msg.uniq_key or r.msg_id, "offsetMsgId": r.msg_id,
                                                "queueId": queue_id, "queueOffset": r.queue_offset})

        return respond() if request is None else _after_flush(ctl, request, results, respond)

    def send_batch(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = cmd.header
        try:
            target = target_queue(ctl, cmd)
            if isinstance(target, RemotingCommand):
                return target
            topic, queue_id = target
            entries = decode_batch(cmd.body)
            if not entries:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
            born_ts = int_field(h, "bornTimestamp", 0)
            host, port = _born(conn)
            host_b = host_to_bytes(host)
            msgs = [MessageInner.from_encoded(topic, body, queue_id, props, decode_properties(props), flag=flag,
                                              born_timestamp=born_ts, born_host=host_b, born_port=port)
                    for flag, body, props in entries]
        except (BadRequest, CodecError, UnicodeDecodeError) as exc:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        max_body = ctl.store.commit_log.max_message_size
        for i, m in enumerate(msgs):  # all or nothing: refuse the batch before writing anything
            refused = ctl.store.commit_log.check(m) if m.limits_error or len(m.body) > max_body else None
            if refused is not None:
                return cmd.response(STATUS_TO_CODE[refused.status], f"message {i} of the batch: {refused.error}")
        started = time.perf_counter()
        results, request = ctl.store.put_messages_nowait(msgs)

        def respond() -> RemotingCommand:
            ok = [r for r in results if r.phy_offset >= 0]
            ctl.stats.put_count += len(ok)
            if ok and ctl.tracer.enabled:
                trace_stored(ctl, msgs, results, h.get("producerGroup", ""), started)
            worst = next((r for r in results if not r.ok), results[0])
            code = STATUS_TO_CODE[worst.status]
            if not ok:
                return cmd.response(code, worst.error or worst.status.name)
            return cmd.response(code, worst.error, {  # the producer knows the unique ids it assigned
                "offsetMsgIds": ",".join(r.msg_id for r in results),
                "queueId": queue_id, "queueOffset": results[0].queue_offset})

        return respond() if request is None else _after_flush(ctl, request, results, respond)

    return {RequestCode.SEND_MESSAGE: send_message, RequestCode.SEND_BATCH_MESSAGE: send_batch}

