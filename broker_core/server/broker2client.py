"""Requests the broker forwards to one consumer client over the client's own connection (RocketMQ's
``Broker2Client`` and ``AdminBrokerProcessor.callConsumer``):

- 307 GET_CONSUMER_RUNNING_INFO (``consumerGroup, clientId, jstackEnable``) and 309 CONSUME_MESSAGE_DIRECTLY
  (``consumerGroup, clientId, msgId`` = the offset message id, ``topic``): a new request with the same code, the
  admin's header fields and body goes to the client (10 s) and the client's answer comes back unchanged (code,
  remark, body). For 309 the broker first adds ``brokerName`` (and ``topicSysFlag``/``groupSysFlag`` when it knows
  the topic and group, as RocketMQ 5) and replaces the body with the stored record at the id's CommitLog offset.
  A client not online: SYSTEM_ERROR ``The Consumer <g> <c> not online``; older than V3_1_8_SNAPSHOT: SYSTEM_ERROR;
  no answer in time: 207 CONSUME_MSG_TIMEOUT ``consumer <g> <c> Timeout: ...``; a lost connection: SYSTEM_ERROR
  ``invoke consumer <g> <c> Exception: ...``.
- 223 INVOKE_BROKER_TO_GET_CONSUMER_STATUS (``topic, group, clientAddr``): 221 GET_CONSUMER_STATUS_FROM_CLIENT to
  each member (or the one whose client id is ``clientAddr``), 5 s each; the reply's ``consumerTable`` holds what each
  answered (a member that failed is left out, as in RocketMQ). No member online: SYSTEM_ERROR
  ``No Any Consumer online in the consumer group: [g]``.

The waits run as tasks on the broker's loop (``Connection.request``); nothing else on the loop waits for them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_core.codec.errors import CodecError
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.client_calls import decode_consumer_status_body, encode_consumer_status_body
from broker_core.protocol.command import V3_0_7_SNAPSHOT
from broker_core.protocol.fields import str_field
from broker_core.remoting.server import Connection, Handler

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

V3_1_8_SNAPSHOT = 62  # MQVersion ordinal: clients from here on answer 307 and 309
CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient
CONSUMER_STATUS_TIMEOUT_S = 5.0  # Broker2Client.getConsumeStatus


def _simple_desc(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Broker2ClientProcessor:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_CONSUMER_RUNNING_INFO: self.running_info,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_directly,
                RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.consumer_status}

    async def running_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return await self.call_consumer(cmd, str_field(cmd.header, "consumerGroup"),
                                        str(cmd.header.get("clientId") or ""))

    async def consume_directly(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = cmd.header
        group = str_field(h, "consumerGroup")
        h["brokerName"] = self.ctl.config.broker_name
        topic = str(h.get("topic") or "")
        if topic:
            tc = self.ctl.topics.get(topic)
            if tc is not None:
                h["topicSysFlag"] = str(tc.topic_sys_flag)
        if group in self.ctl.groups.table:
            h["groupSysFlag"] = "0"  # no group carries system flags here
        msg_id = str(h.get("msgId") or "")
        try:
            rec = self.ctl.store.view_message_by_id(msg_id) if msg_id else None
        except (CodecError, ValueError):
            rec = None
        raw = self.ctl.store.get_message_bytes(rec.commit_log_offset, rec.store_size) if rec is not None else None
        cmd.body = raw or b""  # as Java: a message it cannot find leaves the body as it came
        return await self.call_consumer(cmd, group, str(h.get("clientId") or ""))

    async def call_consumer(self, cmd: RemotingCommand, group: str, client_id: str) -> RemotingCommand:
        """RocketMQ's ``callConsumer``: the request, as it came, to the client's channel; its answer unchanged."""
        info = self.ctl.consumers.groups.get(group, {}).get(client_id)
        if info is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if info.version < V3_1_8_SNAPSHOT:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer <{client_id}> Version <{info.version}> too low to finish, please "
                                "upgrade it to V3_1_8_SNAPSHOT")
        forward = RemotingCommand.request(cmd.code, dict(cmd.header), cmd.body)
        try:
            answer = await info.conn.request(forward, CALL_CLIENT_TIMEOUT_S)
        except TimeoutError:
            return cmd.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                f"consumer <{group}> <{client_id}> Timeout: RemotingTimeoutException: wait response "
                                f"on the channel <{info.conn.remote}> timeout, {int(CALL_CLIENT_TIMEOUT_S * 1000)}(ms)")
        except ConnectionError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"invoke consumer <{group}> <{client_id}> Exception: {_simple_desc(exc)}")
        return cmd.response(answer.code, answer.remark, dict(answer.header), answer.body)

    async def consumer_status(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """223: each member's ``{<MQ>: offset}`` of ``topic`` as it answers 221."""
        h = cmd.header
        topic, group = str_field(h, "topic"), str_field(h, "group")
        origin = str(h.get("clientAddr") or "")
        members = self.ctl.consumers.groups.get(group, {})
        if not members:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]")
        table = {}
        for client_id, info in list(members.items()):
            if info.version < V3_0_7_SNAPSHOT:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"the client does not support this feature. version={info.version}")
            if origin and origin != client_id:
                continue
            ask = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group})
            try:
                answer = await info.conn.request(ask, CONSUMER_STATUS_TIMEOUT_S)
                if answer.code == ResponseCode.SUCCESS and answer.body:
                    table[client_id] = decode_consumer_status_body(answer.body)[0]
            except (TimeoutError, ConnectionError, ValueError, KeyError, TypeError) as exc:
                log.warning("[get-consumer-status] %s of %s/%s failed: %s", client_id, topic, group, exc)
            if origin:
                break
        return cmd.response(ResponseCode.SUCCESS, body=encode_consumer_status_body(consumer_table=table))
