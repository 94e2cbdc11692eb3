"""What a consumer answers when a broker asks it something over its connection (RocketMQ's
``ClientRemotingProcessor``), for the push consumers started on one :class:`ClientInstance`:

- 307 GET_CONSUMER_RUNNING_INFO (``consumerGroup, jstackEnable``): ``ConsumerRunningInfo`` as the Java
  ``DefaultMQPushConsumerImpl.consumerRunningInfo`` builds it: the consumer's settings under their Java field names
  plus ``PROP_*`` keys, its subscriptions, each owned queue's ProcessQueue state (cached count, offsets and size,
  locked, last pull/consume/lock times, the offset it would commit), the per-topic rates (:mod:`.stats`), and the
  threads' stacks when asked.
- 309 CONSUME_MESSAGE_DIRECTLY (``consumerGroup, brokerName``; body one CommitLog record): the listener runs on the
  message once, on the consume pool, and the answer is ``ConsumeMessageDirectlyResult`` (``CR_SUCCESS``,
  ``CR_LATER``, ``CR_RETURN_NULL``, ``CR_THROW_EXCEPTION`` with the error in ``remark``; ``order`` true for an
  orderly listener). Nothing is acknowledged, no offset moves and nothing is sent back, as in RocketMQ.
- 221 GET_CONSUMER_STATUS_FROM_CLIENT (``topic, group``): ``GetConsumerStatusBody.messageQueueTable``, the offset
  each owned queue of ``topic`` would commit.

A group this instance does not consume answers SYSTEM_ERROR ``The Consumer Group <g> not exist in this consumer``
(221: an empty table, as Java's).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from broker_core.client.consumer.base import _FROM_WIRE, subscription_data
from broker_core.client.message import ConsumeStatus, MessageExt, decode_message_exts
from broker_core.codec.names import PROPERTY_RETRY_TOPIC
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.client_calls import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    encode_consumer_status_body,
)
from broker_core.protocol.command import CURRENT_VERSION
from broker_core.protocol.validation import retry_topic

if TYPE_CHECKING:
    from broker_core.client.consumer.push import PushConsumer
    from broker_core.client.instance import ClientInstance

MIB = 1024 * 1024
CLIENT_VERSION_DESC = "V4_9_8" if CURRENT_VERSION == 409 else f"V{CURRENT_VERSION}"


def _not_here(cmd: RemotingCommand, group: str) -> RemotingCommand:
    return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")


def consumer_properties(c: PushConsumer) -> dict[str, str]:
    """The consumer's settings under DefaultMQPushConsumer's field names, plus the ``PROP_*`` keys."""
    flow = c.flow
    props: dict[str, Any] = {
        "consumerGroup": c.group, "messageModel": c.message_model, "consumeFromWhere": _FROM_WIRE[c.consume_from],
        "consumeTimestamp": time.strftime("%Y%m%d%H%M%S", time.localtime(c.consume_timestamp_ms / 1000)),
        "allocateMessageQueueStrategy": type(c.allocate_strategy).__name__,
        "consumeThreadMin": c.consume_thread_max, "consumeThreadMax": c.consume_thread_max,
        "consumeConcurrentlyMaxSpan": flow.max_span, "pullThresholdForQueue": flow.threshold_for_queue,
        "pullThresholdSizeForQueue": flow.threshold_size_for_queue_mib,
        "pullThresholdForTopic": flow.threshold_for_topic,
        "pullThresholdSizeForTopic": flow.threshold_size_for_topic_mib,
        "pullInterval": int(flow.pull_interval_s * 1000),
        "consumeMessageBatchMaxSize": c.consume_message_batch_max_size, "pullBatchSize": c.pull_batch_size,
        "maxReconsumeTimes": c.max_reconsume_times,
        "suspendCurrentQueueTimeMillis": int(c.suspend_current_queue_time * 1000),
        "consumeTimeout": int(c.consume_timeout_s / 60),
        "awaitTerminationMillisWhenShutdown": int(c.await_termination_when_shutdown * 1000),
        "instanceName": c.instance_name, "namesrvAddr": ";".join(c.instance.namesrv_addrs),
        "clientIP": c.instance.client_id.split("@", 1)[0], "unitMode": False, "language": "PYTHON",
        "persistConsumerOffsetInterval": int(c.persist_offset_interval * 1000),
        PROP_CONSUME_ORDERLY: c.orderly, PROP_THREADPOOL_CORE_SIZE: c.consume_thread_max,
        PROP_CONSUMER_START_TIMESTAMP: c.start_timestamp_ms,
        PROP_NAMESERVER_ADDR: "".join(a + ";" for a in c.instance.namesrv_addrs),
        PROP_CONSUME_TYPE: "CONSUME_PASSIVELY", PROP_CLIENT_VERSION: CLIENT_VERSION_DESC}
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in props.items()}


def running_info(c: PushConsumer, jstack: bool = False) -> ConsumerRunningInfo:
    info = ConsumerRunningInfo(consumer_properties(c))
    info.subscriptions = [subscription_data(s, c.sub_versions.get(s.topic, 0)) for s in c.subscriptions.values()]
    for mq, pq in list(c.process_queues.items()):
        offsets = list(pq.msgs)
        info.mq_table[(mq.topic, mq.broker_name, mq.queue_id)] = {
            "commitOffset": pq.committable(), "cachedMsgMinOffset": min(offsets) if offsets else 0,
            "cachedMsgMaxOffset": max(offsets) if offsets else 0, "cachedMsgCount": len(offsets),
            "cachedMsgSizeInMiB": pq.msg_size // MIB, "locked": pq.locked, "droped": pq.dropped,
            "lastLockTimestamp": pq.last_lock_timestamp, "lastPullTimestamp": pq.last_pull_timestamp,
            "lastConsumeTimestamp": pq.last_consume_timestamp}
    for topic in c.subscriptions:
        info.status_table[topic] = c.stats.consume_status(topic)
    if jstack:
        info.jstack = thread_stacks()
    return info


def thread_stacks() -> str:
    """Every thread's stack (what a Java client answers with ``jstack``), innermost call last."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"Thread: {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(out)


def _simple_desc(exc: BaseException) -> str:
    """RocketMQ's ``exceptionSimpleDesc``: the error, then where it was raised."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    tb = traceback.extract_tb(exc.__traceback__)
    return f"{text}, {tb[-1].name}({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else text


def consume_directly(c: PushConsumer, msg: MessageExt) -> ConsumeMessageDirectlyResult:
    """The listener on ``msg`` once (on the calling thread), as ``consumeMessageDirectly`` of RocketMQ's
    concurrent and orderly services: the result and the time it took."""
    result = ConsumeMessageDirectlyResult(order=c.orderly, auto_commit=True)
    origin = msg.properties.get(PROPERTY_RETRY_TOPIC)
    if origin and msg.topic == retry_topic(c.group):  # resetRetryAndNamespace
        msg.topic = origin
    listener = c.listener
    began = time.monotonic()
    try:
        status = listener([msg]) if listener is not None else None
        if status is ConsumeStatus.CONSUME_SUCCESS:
            result.consume_result = CMResult.CR_SUCCESS.value
        elif status is ConsumeStatus.RECONSUME_LATER:
            result.consume_result = CMResult.CR_LATER.value
        else:
            result.consume_result = CMResult.CR_RETURN_NULL.value
    except Exception as exc:  # noqa: BLE001 - the listener's failure is the answer (Java catches Throwable)
        result.consume_result = CMResult.CR_THROW_EXCEPTION.value
        result.remark = _simple_desc(exc)
    result.spent_time_ms = int((time.monotonic() - began) * 1000)
    return result


class ClientRequestProcessor:
    """Answers 307, 309 and 221 for the consumers in ``instance.consumer_table``."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    def install(self, consumer: PushConsumer) -> None:
        """Answer 307/309/221 for ``consumer``'s group on this client instance (the handlers find it by group)."""
        self.instance.consumer_table[consumer.group] = consumer
        self.instance.request_handlers.setdefault(RequestCode.GET_CONSUMER_RUNNING_INFO, self.running_info)
        self.instance.request_handlers.setdefault(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)
        self.instance.request_handlers.setdefault(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self.consumer_status)

    def _consumer(self, group: str) -> PushConsumer | None:
        return self.instance.consumer_table.get(group)

    def running_info(self, cmd: RemotingCommand) -> RemotingCommand:
        group = str(cmd.header.get("consumerGroup") or "")
        c = self._consumer(group)
        if c is None:
            return _not_here(cmd, group)
        jstack = str(cmd.header.get("jstackEnable", "")).lower() == "true"
        return cmd.response(ResponseCode.SUCCESS, body=running_info(c, jstack).encode())

    async def consume_directly(self, cmd: RemotingCommand) -> RemotingCommand:
        group = str(cmd.header.get("consumerGroup") or "")
        c = self._consumer(group)
        if c is None:
            return _not_here(cmd, group)
        msgs = decode_message_exts(cmd.body, str(cmd.header.get("brokerName") or ""))
        if not msgs:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "no message in the request body")
        result = await asyncio.get_running_loop().run_in_executor(c.pool, consume_directly, c, msgs[0])
        return cmd.response(ResponseCode.SUCCESS, body=result.encode())

    def consumer_status(self, cmd: RemotingCommand) -> RemotingCommand:
        topic = str(cmd.header.get("topic") or "")
        c = self._consumer(str(cmd.header.get("group") or ""))
        table = {} if c is None else {(mq.topic, mq.broker_name, mq.queue_id): pq.committable()
                                      for mq, pq in list(c.process_queues.items()) if mq.topic == topic}
        return cmd.response(ResponseCode.SUCCESS, body=encode_consumer_status_body(table))
