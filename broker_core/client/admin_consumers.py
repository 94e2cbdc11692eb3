"""AdminClient's calls that reach one consumer client through a broker, as RocketMQ's ``DefaultMQAdminExtImpl``
routes them:

- :meth:`~ConsumerAdminMixin.client_running_info`: 307 GET_CONSUMER_RUNNING_INFO to the first broker of the route
  of ``%RETRY%<group>`` (every master when that topic has no route yet), which forwards it to the client.
- :meth:`~ConsumerAdminMixin.consume_message_directly`: 309 CONSUME_MESSAGE_DIRECTLY to the broker that stored
  the message (the host in its offset message id), which sends the record to the client; the client's listener
  runs on it once and its ``ConsumeMessageDirectlyResult`` comes back.
- :meth:`~ConsumerAdminMixin.client_consumer_status`: 223 INVOKE_BROKER_TO_GET_CONSUMER_STATUS to each master of
  the topic: each client's offsets as it holds them in memory.

A client not online, too old or too slow answers as the broker says (``ClientError`` with SYSTEM_ERROR or 207
CONSUME_MSG_TIMEOUT and RocketMQ's remark).
"""

from __future__ import annotations

from typing import Any

from broker_core.client.admin_base import AdminBase
from broker_core.client.message import ClientError
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.client_calls import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    decode_consumer_status_body,
)
from broker_core.protocol.validation import retry_topic

FORWARD_TIMEOUT_S = 12.0  # the broker waits 10 s for the client (5 s per member for consumer status)


class ConsumerAdminMixin(AdminBase):
    async def _group_brokers(self, group: str) -> list[str]:
        """The broker addresses to ask about ``group``'s clients: the first of ``%RETRY%<group>``'s route, then the
        other masters."""
        first: list[str] = []
        try:
            first = list((await self._topic_brokers(retry_topic(group))).values())[:1]
        except (ClientError, ConnectionError, TimeoutError):
            pass
        rest = [a for _, a in sorted((await self._master_addrs()).items()) if a not in first]
        return first + rest

    def client_running_info(self, group: str, client_id: str, jstack: bool = False) -> ConsumerRunningInfo:
        """The client's ``ConsumerRunningInfo`` (307), through the first broker that knows it online."""
        async def go() -> ConsumerRunningInfo:
            last: ClientError | None = None
            for addr in await self._group_brokers(group):
                resp = await self.instance.invoke(addr, _request(RequestCode.GET_CONSUMER_RUNNING_INFO, {
                    "consumerGroup": group, "clientId": client_id, "jstackEnable": jstack}), FORWARD_TIMEOUT_S)
                if resp.code == ResponseCode.SUCCESS:
                    return ConsumerRunningInfo.decode(resp.body)
                last = ClientError(resp.code, resp.remark or "GET_CONSUMER_RUNNING_INFO failed")
                if "not online" not in (resp.remark or ""):
                    break
            raise last or ClientError(int(ResponseCode.SYSTEM_ERROR), f"no broker knows group {group}")
        return self._run(go())

    def consume_message_directly(self, group: str, client_id: str, offset_msg_id: str,
                                 topic: str | None = None) -> ConsumeMessageDirectlyResult:
        """309 to the message's store broker, for ``client_id`` of ``group``: what the client's listener answered."""
        ip, port, _ = decode_offset_msg_id(offset_msg_id)
        header: dict[str, Any] = {"consumerGroup": group, "clientId": client_id, "msgId": offset_msg_id}
        if topic:
            header["topic"] = topic

        async def go() -> ConsumeMessageDirectlyResult:
            resp = await self.instance.invoke(f"{ip}:{port}", _request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header),
                                              FORWARD_TIMEOUT_S)
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(resp.code, resp.remark or "CONSUME_MESSAGE_DIRECTLY failed")
            return ConsumeMessageDirectlyResult.decode(resp.body)
        return self._run(go())

    def client_consumer_status(self, topic: str, group: str,
                               client_id: str | None = None) -> dict[str, dict[tuple[str, str, int], int]]:
        """223 on each master of ``topic``: client id -> {(topic, brokerName, queueId): offset}."""
        async def go() -> dict[str, dict[tuple[str, str, int], int]]:
            out: dict[str, dict[tuple[str, str, int], int]] = {}
            for _, addr in sorted((await self._topic_brokers(topic)).items()):
                # the broker gives each member 5 s: a silent one must not make this call time out first
                resp = await self.instance.invoke(addr, _request(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {
                    "topic": topic, "group": group, "clientAddr": client_id or ""}), FORWARD_TIMEOUT_S)
                if resp.code != ResponseCode.SUCCESS:
                    raise ClientError(resp.code, resp.remark or "INVOKE_BROKER_TO_GET_CONSUMER_STATUS failed")
                for cid, table in decode_consumer_status_body(resp.body)[1].items():
                    out.setdefault(cid, {}).update(table)
            return out
        return self._run(go())


def _request(code: int, header: dict[str, Any]) -> RemotingCommand:
    return RemotingCommand.request(code, header)
