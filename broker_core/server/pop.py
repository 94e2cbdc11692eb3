"""RocketMQ 5's POP over remoting, with its request and response headers (``PopMessageRequestHeader`` and the
others of ``org.apache.rocketmq.remoting.protocol.header``), over the shared :class:`PopService`.

Request code: request header fields -> answer.

- POP_MESSAGE 200050: consumerGroup topic queueId (-1: all) maxMsgNums (at most 32) invisibleTime pollTime
  bornTime initMode expType exp order attemptId -> SUCCESS with the records; POLLING_TIMEOUT (none within
  pollTime), POLLING_FULL (no hold slot left); header popTime invisibleTime reviveQid restNum startOffsetInfo
  msgOffsetInfo orderCountInfo (order POP).
- ACK_MESSAGE 200051: consumerGroup topic queueId extraInfo offset -> SUCCESS; NO_MESSAGE (offset outside the
  queue, or the delivery is not current).
- PEEK_MESSAGE 200052: consumerGroup topic queueId maxMsgNums -> SUCCESS with the records from the committed
  offset, nothing changed; PULL_NOT_FOUND.
- CHANGE_MESSAGE_INVISIBLETIME 200053: consumerGroup topic queueId extraInfo offset invisibleTime -> SUCCESS,
  header popTime invisibleTime reviveQid of the new delivery.
- NOTIFICATION 200054: consumerGroup topic queueId pollTime bornTime order attemptId -> SUCCESS, header hasMsg
  pollingFull (waits up to pollTime for a message).
- POLLING_INFO 200055: consumerGroup topic queueId -> SUCCESS, header pollingNum (POP and NOTIFICATION requests
  held for that key).
- BATCH_ACK_MESSAGE 200151: body ``BatchAckMessageRequestBody`` -> SUCCESS (deliveries that are not current
  are passed over, as RocketMQ does).

The receipt handle is ``extraInfo`` (:mod:`broker_core.protocol.pop`); clients build it from the POP answer's
header (``startOffsetInfo``/``msgOffsetInfo`` per ``retry@queueId``) as RocketMQ 5's ``processPopResponse``
does. A redelivered message carries its count in the record's RECONSUMETIMES (and, for an order POP, in
``orderCountInfo``). Beyond RocketMQ (added, never changing what a client sees): an optional
``maxReconsumeTimes`` POP header field (else the group's ``retryMaxTimes``), and an ACK or change of a delivery
that is no longer current is refused with NO_MESSAGE and a remark saying why (RocketMQ accepts it silently).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Union

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import BadRequest, bool_field, int_field, str_field
from broker_core.protocol.filter import EXPRESSION_TAG, SubscriptionParseError, parse_subscription
from broker_core.protocol.pop import (
    NORMAL_TOPIC,
    POP_ORDER_REVIVE_QUEUE,
    offset_info,
    parse_batch_ack_body,
    parse_extra_info,
)
from broker_core.protocol.validation import group_error
from broker_core.remoting.server import Connection, Handler
from broker_core.server.consume import trace_delivered
from broker_core.server.pop_service import (
    INIT_MODE_MIN,
    MAX_INVISIBLE_MS,
    HandleError,
    PopResult,
    PopService,
    now_ms,
)

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

MAX_POP_NUMS = 32  # PopMessageProcessor: "pop message's num is greater than 32"
REVIVE_QUEUE_NUM = 8  # BrokerConfig.reviveQueueNum: the reviveQid a non-order POP answer names
TIMEOUT_TOO_MUCH_MS = 500  # PopMessageRequestHeader.isTimeoutTooMuch

Response = Union[RemotingCommand, Awaitable[RemotingCommand]]  # noqa: UP007 - a runtime alias

__all__ = ["MAX_INVISIBLE_MS", "HandleError", "PopProcessor", "PopService", "pop_response_header"]


def pop_response_header(result: PopResult, invisible_ms: int, rest: int, order: bool) -> dict[str, object]:
    """The ``PopMessageResponseHeader`` of ``result``: per queue its first offset, its offsets in body order
    and, for an order POP, each message's count (``retry qo<queue>%<offset> count``, as RocketMQ writes it)."""
    pop_time = result.pop_time or now_ms()
    by_queue: dict[int, list[int]] = {}
    counts: list[tuple[str, int | str, str]] = []
    for m in result.meta:
        q, offset = int(str(m["queueId"])), int(str(m["offset"]))
        by_queue.setdefault(q, []).append(offset)
        counts.append((NORMAL_TOPIC, f"qo{q}%{offset}", str(m["reconsumeTimes"])))
    header: dict[str, object] = {
        "popTime": pop_time, "invisibleTime": invisible_ms,
        "reviveQid": POP_ORDER_REVIVE_QUEUE if order else pop_time % REVIVE_QUEUE_NUM, "restNum": rest,
        "startOffsetInfo": offset_info((NORMAL_TOPIC, q, str(min(o))) for q, o in by_queue.items()),
        "msgOffsetInfo": offset_info((NORMAL_TOPIC, q, ",".join(map(str, o))) for q, o in by_queue.items())}
    if order:
        header["orderCountInfo"] = ";".join(f"{r} {k} {c}" for r, k, c in counts)
    return header


class PopProcessor:
    """The seven POP request codes over a :class:`PopService`."""

    def __init__(self, ctl: Broker, service: PopService) -> None:
        self.ctl = ctl
        self.service = service
        self.polling: Counter[tuple[str, str, int]] = Counter()  # (topic, group, queueId) -> held requests

    def _topic_error(self, cmd: RemotingCommand, topic: str, queue_id: int | None = None) -> RemotingCommand | None:
        cfg = self.ctl.topics.get(topic)
        if cfg is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if queue_id is not None and not 0 <= queue_id < cfg.read_queue_nums:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                f"topicConfig.readQueueNums:[{cfg.read_queue_nums}]")
        return None

    def _offset_error(self, cmd: RemotingCommand, topic: str, queue_id: int, offset: int,
                      inclusive_max: bool) -> RemotingCommand | None:
        store = self.ctl.store
        low, high = store.get_min_offset_in_queue(topic, queue_id), store.get_max_offset_in_queue(topic, queue_id)
        if offset < low or offset > high or (offset == high and not inclusive_max):
            return cmd.response(ResponseCode.NO_MESSAGE,
                                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{low}~{high}")
        return None

    async def _long_poll(self, key: tuple[str, str, int], poll_ms: int,
                         attempt: Callable[[], RemotingCommand | None],
                         on_timeout: Callable[[], RemotingCommand]) -> RemotingCommand:
        ctl = self.ctl
        topic, _, queue_id = key
        keys = [(topic, q) for q in self.service.queue_ids(topic, queue_id)]
        deadline = time.monotonic() + poll_ms / 1000
        self.polling[key] += 1
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return on_timeout()
                await ctl.hold.wait_any(keys, min(left, 1.0))  # type: ignore[union-attr]  # checked by the caller
                resp = attempt()  # also catches in-flight messages whose invisible time ran out
                if resp is not None:
                    return resp
        finally:
            self.polling[key] -= 1
            if self.polling[key] <= 0:
                del self.polling[key]

    def handlers(self) -> dict[int, Handler]:
        ctl, service = self.ctl, self.service

        def _group(h: dict[str, object]) -> str:
            group = str_field(h, "consumerGroup")
            err = group_error(group)
            if err:
                raise BadRequest(err)
            return group

        async def synced(resp: RemotingCommand) -> RemotingCommand:
            await asyncio.get_running_loop().run_in_executor(None, service.state.sync)
            return resp

        def durable(resp: RemotingCommand) -> Response:
            """With SYNC_FLUSH the journal is fsynced before the answer (pop_state's crash behaviour)."""
            return synced(resp) if service.state.sync_each else resp

        def max_poll_ms(h: dict[str, object]) -> int:
            return max(0, min(int_field(h, "pollTime", 0), int(ctl.config.remoting.long_polling_max_s * 1000)))

        def pop(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group = _group(h)
            topic = str_field(h, "topic")
            queue_id = int_field(h, "queueId", -1)
            poll_ms = max_poll_ms(h)
            born = int_field(h, "bornTime", 0)
            if born and now_ms() - born - int_field(h, "pollTime", 0) > TIMEOUT_TOO_MUCH_MS:
                return cmd.response(ResponseCode.POLLING_TIMEOUT,
                                    f"the broker[{ctl.config.broker_ip}] pop message is timeout too much")
            max_nums = int_field(h, "maxMsgNums", 32)
            if max_nums > MAX_POP_NUMS:
                return cmd.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ctl.config.broker_ip}] pop message's num is greater than 32")
            err = self._topic_error(cmd, topic, queue_id if queue_id >= 0 else None)
            if err is not None:
                return err
            invisible = int_field(h, "invisibleTime")
            if not 1000 <= invisible <= MAX_INVISIBLE_MS:
                raise BadRequest(f"invisibleTime must be 1000..{MAX_INVISIBLE_MS} ms, got {invisible}")
            kind = str(h.get("expType") or EXPRESSION_TAG)
            if kind != EXPRESSION_TAG and not ctl.config.enable_property_filter:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"The broker does not support consumer to filter message by {kind}")
            try:
                sub = parse_subscription(topic, str(h.get("exp") or "*"), kind)
            except SubscriptionParseError as exc:
                return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
            max_reconsume = int_field(h, "maxReconsumeTimes", ctl.groups.get_or_create(group).retry_max_times)
            order = bool_field(h, "order")
            init_mode = int_field(h, "initMode", INIT_MODE_MIN)

            def answer(code: int, remark: str, result: PopResult) -> RemotingCommand:
                header = pop_response_header(result, invisible, service.rest(group, topic, queue_id), order)
                return cmd.response(code, remark, header, b"".join(result.records))

            def attempt() -> RemotingCommand | None:
                result = service.pop(group, topic, max(1, max_nums), invisible, sub, max_reconsume, fifo=order,
                                     queue_id=queue_id, init_mode=init_mode)
                if not result.records:
                    return None
                ctl.stats.get_count += len(result.meta)
                if ctl.tracer.enabled:
                    trace_delivered(ctl, b"".join(result.records), group)
                return answer(ResponseCode.SUCCESS, "FOUND", result)

            def none_found() -> RemotingCommand:
                inflight = service.inflight(group)
                if inflight >= ctl.config.pop_inflight_message_threshold:
                    return answer(ResponseCode.POLLING_TIMEOUT, (
                        f"group {group} has {inflight} messages received and not acked (popInflightMessageThreshold "
                        f"{ctl.config.pop_inflight_message_threshold}): ack some or wait for their invisible time"),
                        PopResult())
                return answer(ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", PopResult())

            first = attempt()
            if first is not None:
                return durable(first)
            if poll_ms == 0 or ctl.hold is None or service.inflight(group) >= ctl.config.pop_inflight_message_threshold:
                return durable(none_found())
            if not ctl.hold.reserve(conn):
                return answer(ResponseCode.POLLING_FULL, "POLLING_FULL", PopResult())

            async def held() -> RemotingCommand:
                return await synced(await self._long_poll((topic, group, queue_id), poll_ms, attempt, none_found))
            return ctl.hold.held(conn, held())

        def ack(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group, topic = _group(h), str_field(h, "topic")
            info = parse_extra_info(str_field(h, "extraInfo"))
            queue_id, offset = int_field(h, "queueId"), int_field(h, "offset")
            err = self._topic_error(cmd, topic, queue_id) or self._offset_error(cmd, topic, queue_id, offset, True)
            if err is not None:
                return err
            try:
                service.ack_at(group, topic, queue_id, offset, info.pop_time)
            except HandleError as exc:
                return cmd.response(ResponseCode.NO_MESSAGE, str(exc))
            return durable(cmd.response(ResponseCode.SUCCESS))

        def batch_ack(cmd: RemotingCommand, conn: Connection) -> Response:
            _, acks = parse_batch_ack_body(cmd.body or b"{}")
            if not acks:
                return cmd.response(ResponseCode.NO_MESSAGE)
            for a in acks:
                topic = a.real_topic()
                if ctl.topics.get(topic) is None:
                    continue
                for offset in a.offsets:
                    try:
                        service.ack_at(a.group, topic, a.queue_id, offset, a.pop_time)
                    except HandleError:
                        pass  # acked already, delivered again, or expired: RocketMQ passes it over too
            return durable(cmd.response(ResponseCode.SUCCESS))

        def change(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group, topic = _group(h), str_field(h, "topic")
            info = parse_extra_info(str_field(h, "extraInfo"))
            queue_id, offset = int_field(h, "queueId"), int_field(h, "offset")
            invisible = int_field(h, "invisibleTime")
            if not 1000 <= invisible <= MAX_INVISIBLE_MS:
                raise BadRequest(f"invisibleTime must be 1000..{MAX_INVISIBLE_MS} ms, got {invisible}")
            err = self._topic_error(cmd, topic, queue_id) or self._offset_error(cmd, topic, queue_id, offset, False)
            if err is not None:
                return err
            try:
                fl = service.change_at(group, topic, queue_id, offset, info.pop_time, invisible)
            except HandleError as exc:
                return cmd.response(ResponseCode.NO_MESSAGE, str(exc))
            return durable(cmd.response(ResponseCode.SUCCESS, "", {
                "popTime": fl.serial, "invisibleTime": invisible, "reviveQid": info.revive_qid}))

        def peek(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group, topic = _group(h), str_field(h, "topic")
            queue_id = int_field(h, "queueId", -1)
            max_nums = int_field(h, "maxMsgNums", 32)
            if max_nums > MAX_POP_NUMS:
                return cmd.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ctl.config.broker_ip}] peek message's num is greater than 32")
            err = self._topic_error(cmd, topic, queue_id if queue_id >= 0 else None)
            if err is not None:
                return err
            records, rest = service.peek(group, topic, queue_id, max(1, max_nums))
            header = {"popTime": now_ms(), "invisibleTime": 0, "reviveQid": 0, "restNum": rest}
            if not records:
                return cmd.response(ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", header)
            return cmd.response(ResponseCode.SUCCESS, "FOUND", header, b"".join(records))

        def notification(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group, topic = _group(h), str_field(h, "topic")
            queue_id = int_field(h, "queueId", -1)
            err = self._topic_error(cmd, topic, queue_id if queue_id >= 0 else None)
            if err is not None:
                return err

            def attempt() -> RemotingCommand | None:
                if service.has_message(group, topic, queue_id):
                    return cmd.response(ResponseCode.SUCCESS, "", {"hasMsg": "true", "pollingFull": "false"})
                return None

            def none() -> RemotingCommand:
                return cmd.response(ResponseCode.SUCCESS, "", {"hasMsg": "false", "pollingFull": "false"})

            found = attempt()
            poll_ms = max_poll_ms(h)
            if found is not None or poll_ms == 0 or ctl.hold is None:
                return found or none()
            if not ctl.hold.reserve(conn):
                return cmd.response(ResponseCode.SUCCESS, "", {"hasMsg": "false", "pollingFull": "true"})
            return ctl.hold.held(conn, self._long_poll((topic, group, queue_id), poll_ms, attempt, none))

        def polling_info(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group, topic = _group(h), str_field(h, "topic")
            queue_id = int_field(h, "queueId", -1)
            cfg = ctl.topics.get(topic)
            if cfg is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
            if queue_id >= cfg.read_queue_nums:
                return cmd.response(ResponseCode.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                    f"topicConfig.readQueueNums:[{cfg.read_queue_nums}]")
            return cmd.response(ResponseCode.SUCCESS, "", {"pollingNum": self.polling[(topic, group, queue_id)]})

        return {RequestCode.POP_MESSAGE: pop, RequestCode.ACK_MESSAGE: ack, RequestCode.PEEK_MESSAGE: peek,
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME: change, RequestCode.NOTIFICATION: notification,
                RequestCode.POLLING_INFO: polling_info, RequestCode.BATCH_ACK_MESSAGE: batch_ack}
