"""PULL_MESSAGE (with long polling), consumer offsets, heartbeats and group membership."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker_core.codec.message import PROPERTY_RETRY_TOPIC, decode_record
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import BadRequest, int_field, str_field
from broker_core.protocol.filter import EXPRESSION_TAG, SubscriptionParseError, parse_subscription
from broker_core.protocol.headers import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND
from broker_core.protocol.validation import group_error, retry_topic, topic_error
from broker_core.remoting.server import Connection, GatherResponse, Handler, Response
from broker_core.server.property_filter import filter_records
from broker_core.server.retry import ensure_topic
from broker_core.server.state import SubscriptionGroupConfig
from broker_core.store import GetMessageResult, GetStatus

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

from broker_core.codec.names import ADMIN_GROUP

_RETRY_NOW = (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING)
_MOVED = (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY)
_EMPTY_QUEUE = (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE)


class ConsumerProcessor:
    """Pulls (with long polling), consumer offsets, heartbeats, group membership and queue locks."""

    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl

    def handlers(self) -> dict[int, Handler]:
        ctl = self.ctl
        store = ctl.store

        def pull(cmd: RemotingCommand, conn: Connection) -> Response | Awaitable[Response]:
            """PULL_MESSAGE as RocketMQ's ``PullMessageProcessor``: ``sysFlag`` decides whether the request may be
            held (SUSPEND), whether ``commitOffset`` is stored (COMMIT_OFFSET) and whether the request's
            ``subscription`` is used or the one the group registered by heartbeat (SUBSCRIPTION)."""
            h = cmd.header
            try:
                group = str_field(h, "consumerGroup")
                topic = str_field(h, "topic")
                queue_id = int_field(h, "queueId")
                offset = int_field(h, "queueOffset")
                max_nums = max(1, min(int_field(h, "maxMsgNums", 32), 1024))
                sys_flag = int_field(h, "sysFlag", 0)
                commit_offset = int_field(h, "commitOffset", 0)
                suspend_ms = max(0, min(int_field(h, "suspendTimeoutMillis", 0),
                                        int(ctl.config.remoting.long_polling_max_s * 1000)))
                if not ctl.config.long_polling_enable:  # short polling: RocketMQ's shortPollingTimeMills
                    suspend_ms = min(suspend_ms, ctl.config.short_polling_time_ms)
                sub_version = int_field(h, "subVersion", 0)
            except BadRequest as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            err = topic_error(topic) or group_error(group)
            if err:
                return cmd.response(ResponseCode.SYSTEM_ERROR, err)
            group_cfg = ctl.groups.get_or_create(group)
            if not group_cfg.consume_enable:
                return cmd.response(ResponseCode.NO_PERMISSION,
                                    f"subscription group [{group}] no permission to consume")
            cfg = ctl.topics.get(topic)
            if cfg is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{topic}] not exist, apply first please! (broker {ctl.config.broker_name})")
            if not cfg.readable:
                return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
            if not 0 <= queue_id < cfg.read_queue_nums:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                    f"[{cfg.read_queue_nums}] consumer:[{conn.remote}]")
            if sys_flag & PULL_SUBSCRIPTION:
                expression = str(h.get("subscription") or "*")
                expression_type = str(h.get("expressionType") or EXPRESSION_TAG)
            else:
                registered = ctl.consumers.find_subscription(group, topic)
                if registered is None:
                    return cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                        f"the consumer's subscription of {topic} not exist (group {group})")
                expression, expression_type, registered_version = registered
                if registered_version < sub_version:
                    return cmd.response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            if expression_type not in ("", EXPRESSION_TAG) and not ctl.config.enable_property_filter:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"The broker does not support consumer to filter message by {expression_type}")
            try:
                sub = parse_subscription(topic, expression, expression_type)
            except SubscriptionParseError as exc:
                return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
            if sys_flag & PULL_COMMIT_OFFSET and not ctl.ha.is_slave:  # stored on the first execution only
                ctl.offsets.commit(group, topic, queue_id, commit_offset)
            may_suspend = bool(sys_flag & PULL_SUSPEND) and suspend_ms > 0 and ctl.hold is not None
            hashes = sub.tag_hashes
            deadline = time.monotonic() + suspend_ms / 1000

            def _offsets(res: GetMessageResult) -> dict[str, int]:
                return _pull_offsets(res, suggest_broker(ctl, group_cfg, topic, queue_id, res))

            traced = ctl.tracer.enabled and group != ADMIN_GROUP  # the console browsing is not a delivery
            # the plain case answers with views of the mapped CommitLog, written without a copy (zero-copy)
            views = not sub.is_sql92 and not traced

            def attempt(final: bool) -> RemotingCommand | GatherResponse | None:
                res = store.get_message(topic, queue_id, offset, max_nums, hashes, decode=False, views=views)
                if res.status is GetStatus.FOUND:
                    if res.holds:
                        ctl.stats.get_count += len(res.queue_offsets)
                        return GatherResponse(cmd.response(ResponseCode.SUCCESS, "FOUND", _offsets(res)),
                                              res.chunks, res.release)  # type: ignore[arg-type]  # views: memoryviews
                    if sub.is_sql92:
                        body, found = filter_records(res.chunks, sub)
                        if not found:  # every record looked at was filtered out: move on at once
                            return cmd.response(ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE",
                                                _offsets(res))
                    else:
                        body, found = b"".join(res.chunks), len(res.queue_offsets)
                    ctl.stats.get_count += found
                    if traced:
                        trace_delivered(ctl, body, group)
                    return cmd.response(ResponseCode.SUCCESS, "FOUND", _offsets(res), body)
                code = pull_code(res.status, offset)
                if code == ResponseCode.PULL_NOT_FOUND and not final and res.status is not GetStatus.OFFSET_FOUND_NULL:
                    return None
                return cmd.response(code, res.error or res.status.name, _offsets(res))

            async def long_poll() -> RemotingCommand | GatherResponse:
                while True:
                    left = deadline - time.monotonic()
                    if left > 0:
                        await ctl.hold.wait(topic, queue_id, left)  # type: ignore[union-attr]  # may_suspend checked ctl.hold
                    resp = attempt(final=deadline - time.monotonic() <= 0)
                    if resp is not None:
                        return resp

            first = attempt(final=not may_suspend)
            if first is not None:
                return first
            assert ctl.hold is not None  # may_suspend checked it
            if not ctl.hold.reserve(conn):  # the connection holds maxHeldPullsPerConnection: answer now
                return attempt(final=True) or cmd.response(ResponseCode.PULL_NOT_FOUND, "no new message")
            return ctl.hold.held(conn, long_poll())

        async def query_offset(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            """The committed offset; with none stored, 0 when the queue still starts at 0 and its first message
            is in memory (RocketMQ's rule, which makes a new group start a young topic from the beginning)."""
            h = cmd.header
            group, topic, queue_id = str_field(h, "consumerGroup"), str_field(h, "topic"), int_field(h, "queueId")
            offset = ctl.offsets.query(group, topic, queue_id)
            if offset >= 0:
                return cmd.response(ResponseCode.SUCCESS, "", {"offset": offset})
            if store.get_min_offset_in_queue(topic, queue_id) <= 0 and not store.check_in_disk_by_consume_offset(
                    topic, queue_id, 0, ctl.config.access_message_in_memory_max_ratio):
                return cmd.response(ResponseCode.SUCCESS, "", {"offset": 0})
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer "
                                "boot first")

        async def update_offset(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            ctl.offsets.commit(str_field(h, "consumerGroup"), str_field(h, "topic"), int_field(h, "queueId"),
                               int_field(h, "commitOffset"))
            return cmd.response(ResponseCode.SUCCESS)

        async def heartbeat(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            try:
                data = json.loads(cmd.body or b"{}")
                if not isinstance(data, dict):
                    raise BadRequest("heartbeat body must be a JSON object (HeartbeatData)")
                client_id = str(data.get("clientID") or cmd.header.get("clientID") or "")
                if not client_id:
                    raise BadRequest("heartbeat without clientID")
                for c in data.get("consumerDataSet", []):
                    err = group_error(c.get("groupName"))
                    if err:
                        raise BadRequest(err)
                    ctl.groups.get_or_create(c["groupName"])
                    if str(c.get("messageModel", "CLUSTERING")) == "CLUSTERING":  # RocketMQ creates the retry topic
                        ensure_topic(ctl, retry_topic(c["groupName"]))
                changed = ctl.consumers.heartbeat(client_id, conn, data, cmd.language, cmd.version)
            except (ValueError, KeyError, TypeError) as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat: {exc}")
            for group in changed:
                ctl.consumers.notify_changed(group)
            return cmd.response(ResponseCode.SUCCESS)

        async def unregister_client(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            group = h.get("consumerGroup")
            for changed in set(ctl.consumers.unregister(str_field(h, "clientID"), str(group) if group else None)):
                ctl.consumers.notify_changed(changed)
            return cmd.response(ResponseCode.SUCCESS)

        async def consumer_list(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            group = str_field(cmd.header, "consumerGroup")
            ids = ctl.consumers.client_ids(group)
            if not ids:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
            return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())

        async def max_offset(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS, "", {"offset": store.get_max_offset_in_queue(
                str_field(cmd.header, "topic"), int_field(cmd.header, "queueId"))})

        async def min_offset(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS, "", {"offset": store.get_min_offset_in_queue(
                str_field(cmd.header, "topic"), int_field(cmd.header, "queueId"))})

        def check_client_config(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            """CHECK_CLIENT_CONFIG (46), sent for non-TAG subscriptions: SQL92 needs ``enablePropertyFilter``
            (else SYSTEM_ERROR, as RocketMQ) and an expression that compiles (else SUBSCRIPTION_PARSE_FAILED)."""
            try:
                data = json.loads(cmd.body or b"{}")
                sub = data.get("subscriptionData") or {}
            except (ValueError, AttributeError) as exc:
                raise BadRequest(f"bad CheckClientRequestBody: {exc}") from None
            kind = str(sub.get("expressionType") or EXPRESSION_TAG)
            if kind == EXPRESSION_TAG:
                return cmd.response(ResponseCode.SUCCESS)
            if not ctl.config.enable_property_filter:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"The broker does not support consumer to filter message by {kind}")
            try:
                parse_subscription(str(sub.get("topic") or ""), str(sub.get("subString") or ""), kind)
            except SubscriptionParseError as exc:
                return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
            return cmd.response(ResponseCode.SUCCESS)

        async def earliest_store_time(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS, "", {"timestamp": store.get_earliest_message_time(
                str_field(cmd.header, "topic"), int_field(cmd.header, "queueId"))})

        async def search_offset(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            offset = await asyncio.get_running_loop().run_in_executor(
                None, store.get_offset_in_queue_by_time, str_field(h, "topic"), int_field(h, "queueId"),
                int_field(h, "timestamp"))
            return cmd.response(ResponseCode.SUCCESS, "", {"offset": offset})

        def _lock_body(cmd: RemotingCommand) -> tuple[str, str, list[tuple[str, str, int]]]:
            try:
                data = json.loads(cmd.body or b"{}")
                mqs = [(str(m["topic"]), str(m["brokerName"]), int(m["queueId"])) for m in data.get("mqSet", [])]
                return str(data["consumerGroup"]), str(data["clientId"]), mqs
            except (ValueError, KeyError, TypeError) as exc:
                raise BadRequest(f"lock body must be JSON {{consumerGroup, clientId, mqSet}}: {exc}") from None

        def lock_batch(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            group, client_id, mqs = _lock_body(cmd)
            conn.attributes.setdefault("lock_clients", set()).add(client_id)
            locked = ctl.locks.try_lock_batch(group, mqs, client_id)
            body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in locked]}
            return cmd.response(ResponseCode.SUCCESS, body=json.dumps(body).encode())

        def unlock_batch(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            group, client_id, mqs = _lock_body(cmd)
            ctl.locks.unlock_batch(group, mqs, client_id)
            return cmd.response(ResponseCode.SUCCESS)

        def report_trace(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            try:
                items = json.loads(cmd.body or b"[]")
                events = [ctl.tracer.event(
                    "consumed" if i["status"] == "CONSUME_SUCCESS" else "reconsume-later", str(i["msgId"]),
                    str(i["topic"]), group=str(i["group"]), keys=list(i.get("keys", [])), cost_ms=float(i["costMs"]),
                    queue_id=int(i.get("queueId", -1)), queue_offset=int(i.get("queueOffset", -1)),
                    reconsume_times=int(i.get("reconsumeTimes", 0)), status=str(i["status"]),
                    timestamp=int(i["timestamp"])) for i in items]
            except (ValueError, KeyError, TypeError) as exc:
                raise BadRequest(f"bad trace report: {exc}") from None
            ctl.tracer.emit(events)
            return cmd.response(ResponseCode.SUCCESS)

        return {
            RequestCode.REPORT_CONSUME_TRACE: report_trace,
            RequestCode.LOCK_BATCH_MQ: lock_batch, RequestCode.UNLOCK_BATCH_MQ: unlock_batch,
            RequestCode.PULL_MESSAGE: pull, RequestCode.QUERY_CONSUMER_OFFSET: query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: update_offset, RequestCode.HEART_BEAT: heartbeat,
            RequestCode.UNREGISTER_CLIENT: unregister_client, RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer_list,
            RequestCode.GET_MAX_OFFSET: max_offset, RequestCode.GET_MIN_OFFSET: min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: earliest_store_time,
            RequestCode.CHECK_CLIENT_CONFIG: check_client_config,
        }


def trace_delivered(ctl: Broker, body: bytes, group: str) -> None:
    events = []
    pos = 0
    while pos < len(body):
        rec = decode_record(body, pos, check_crc=False)
        topic = rec.properties.get(PROPERTY_RETRY_TOPIC, rec.topic)
        events.append(ctl.tracer.event("delivered", rec.msg_id, topic, group=group, keys=rec.keys,
                                       queue_id=rec.queue_id, queue_offset=rec.queue_offset,
                                       reconsume_times=rec.reconsume_times))
        pos += rec.store_size
    ctl.tracer.emit(events)


def pull_code(status: GetStatus, offset: int) -> ResponseCode:
    """The response code of a pull that found nothing, as ``PullMessageProcessor`` maps store statuses."""
    if status in _RETRY_NOW:
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in _MOVED:
        return ResponseCode.PULL_OFFSET_MOVED
    if status in _EMPTY_QUEUE:
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_NOT_FOUND  # OFFSET_OVERFLOW_ONE: nothing new yet


def suggest_broker(ctl: Broker, group_cfg: SubscriptionGroupConfig, topic: str, queue_id: int,
                   res: GetMessageResult) -> int:
    """``suggestWhichBrokerId`` as upstream ``PullMessageProcessor``: with ``slaveReadEnable``, the group's
    ``whichBrokerWhenConsumeSlowly`` while the consumer lags (the last message pulled lies further behind the
    CommitLog end than ``accessMessageInMemoryMaxRatio`` % of RAM), else the group's ``brokerId``; without it,
    always the master (0)."""
    if not ctl.config.slave_read_enable:
        return 0
    lagging = res.status is GetStatus.FOUND and res.next_begin_offset > 0 and ctl.store.check_in_disk_by_consume_offset(
        topic, queue_id, res.next_begin_offset - 1, ctl.config.access_message_in_memory_max_ratio)
    return group_cfg.which_broker_when_consume_slowly if lagging else group_cfg.broker_id


def _pull_offsets(res: GetMessageResult, suggest: int = 0) -> dict[str, int]:
    """The four fields every pull response carries (Java clients unbox them: a missing one is an NPE)."""
    return {"suggestWhichBrokerId": suggest, "nextBeginOffset": res.next_begin_offset, "minOffset": res.min_offset,
            "maxOffset": res.max_offset}
