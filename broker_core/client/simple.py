"""SimpleConsumer: stateless receive/ack consumption over RocketMQ 5's POP (``broker_core.server.pop`` has the
request and response headers; the receipt handle is RocketMQ's ``extraInfo``).

    consumer = SimpleConsumer("billing", "127.0.0.1:9876").start()
    consumer.subscribe("orders", "created")
    for msg in consumer.receive(max_num=16, invisible_duration=30, wait=5):
        handle(msg)
        consumer.ack(msg)              # or consumer.change_invisible_duration(msg, 60)

Messages not acked within their invisible duration are received again (``reconsume_times`` raised) and go
to the group's DLQ after ``max_reconsume_times``. Receives rotate over the brokers holding the topic.
"""

from __future__ import annotations

import itertools
import time

from broker_core.client.consumer import _ConsumerBase
from broker_core.client.instance import ClientInstance
from broker_core.client.message import ClientError, MessageExt, decode_message_exts
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.fields import BadRequest
from broker_core.protocol.filter import Subscription, parse_subscription
from broker_core.protocol.pop import ExtraInfo, parse_extra_info, parse_offset_info, retry_mark
from broker_core.remoting.client import run_sync

MAX_POP_NUMS = 32  # a broker refuses a POP of more (INVALID_PARAMETER)


class SimpleConsumer(_ConsumerBase):
    def __init__(self, group: str, namesrv_addr: str, *, max_reconsume_times: int = 16,
                 instance: ClientInstance | None = None, credentials: SessionCredentials | None = None,
                 instance_name: str | None = None) -> None:
        super().__init__(group, namesrv_addr, instance, credentials, instance_name)
        self.max_reconsume_times = max_reconsume_times
        self.subscriptions: dict[str, Subscription] = {}
        self._rr = itertools.count()

    def start(self) -> SimpleConsumer:
        if self._registered:
            return self
        self._register()
        run_sync(self.instance.start())
        return self

    def shutdown(self) -> None:
        if self._registered:
            self._unregister()
            run_sync(self.instance.shutdown())

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """By tag, or by SQL92 over properties with ``expression_type="SQL92"`` (checked here again)."""
        self.subscriptions[topic] = parse_subscription(topic, expression, expression_type)

    def receive(self, max_num: int = 16, invisible_duration: float = 30.0, wait: float = 0.0,
                topic: str | None = None) -> list[MessageExt]:
        """Up to ``max_num`` messages, invisible to other receivers for ``invisible_duration`` seconds; waits
        up to ``wait`` seconds when there is none. Each has ``receipt_handle`` for :meth:`ack`."""
        return run_sync(self.areceive(max_num, invisible_duration, wait, topic), wait + 10)

    async def areceive(self, max_num: int = 16, invisible_duration: float = 30.0, wait: float = 0.0,
                       topic: str | None = None) -> list[MessageExt]:
        if not self.subscriptions:
            raise ValueError("subscribe() before receive()")
        topics = [topic] if topic else sorted(self.subscriptions)
        sub = self.subscriptions[topics[next(self._rr) % len(topics)]]
        route = await self.instance.route(sub.topic)
        brokers = sorted({q.broker_name for q in route.read_queues})
        if not brokers:
            return []
        start = next(self._rr)
        for i, broker in enumerate(brokers[start % len(brokers):] + brokers[:start % len(brokers)]):
            last = i == len(brokers) - 1
            poll_ms = int(wait * 1000) if last else 0
            header = {"consumerGroup": self.group, "topic": sub.topic, "queueId": -1,
                      "maxMsgNums": min(max_num, MAX_POP_NUMS), "invisibleTime": int(invisible_duration * 1000),
                      "pollTime": poll_ms, "bornTime": int(time.time() * 1000), "initMode": 0,
                      "expType": sub.expression_type, "exp": sub.expression, "order": False,
                      "maxReconsumeTimes": self.max_reconsume_times}
            resp = await self.instance.invoke(self.instance.broker_addr(broker),
                                              RemotingCommand.request(RequestCode.POP_MESSAGE, header), wait + 5)
            if resp.code == ResponseCode.SUCCESS:
                msgs = decode_message_exts(resp.body, broker)
                attach_receipt_handles(msgs, resp.header, broker)
                return [m for m in msgs if sub.matches_message(m.properties)]
            if resp.code not in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_FULL):
                raise ClientError(resp.code, resp.remark)
        return []

    def _handle_request(self, msg: MessageExt, code: int,
                        extra: dict[str, object]) -> tuple[ExtraInfo, RemotingCommand]:
        """ACK_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME for ``msg``: the queue and offset come from its receipt
        handle (RocketMQ's ``extraInfo``), as RocketMQ 5's clients take them."""
        if not msg.receipt_handle:
            raise ValueError("message has no receipt handle (was it received by a SimpleConsumer?)")
        header: dict[str, object] = {"consumerGroup": self.group, "topic": msg.topic,
                                     "extraInfo": msg.receipt_handle, **extra}
        try:
            info: ExtraInfo | None = parse_extra_info(msg.receipt_handle)
        except BadRequest:
            info = None  # sent as it is: the broker names what is wrong with it (or is found unreachable)
        if info is not None:
            header["queueId"] = info.queue_id
            header["offset"] = info.queue_offset if info.queue_offset is not None else msg.queue_offset

        async def go() -> RemotingCommand:
            await self.instance.route(msg.topic)
            return await self.instance.invoke(self.instance.broker_addr(msg.broker_name),
                                              RemotingCommand.request(code, header))
        resp = run_sync(go())
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)
        assert info is not None  # a broker answers SUCCESS only for a well-formed extraInfo
        return info, resp

    def ack(self, msg: MessageExt) -> None:
        """Finish ``msg``. Raises ClientError if its handle expired or was already used."""
        self._handle_request(msg, RequestCode.ACK_MESSAGE, {})

    def change_invisible_duration(self, msg: MessageExt, seconds: float) -> None:
        """Make ``msg`` invisible for ``seconds`` from now; its receipt handle is replaced (the old one dies)."""
        info, resp = self._handle_request(msg, RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                          {"invisibleTime": int(seconds * 1000)})
        offset = info.queue_offset if info.queue_offset is not None else msg.queue_offset
        msg.receipt_handle = ExtraInfo(offset, int(str(resp.header["popTime"])), int(str(resp.header["invisibleTime"])),
                                       int(str(resp.header["reviveQid"])), info.retry, info.broker_name,
                                       info.queue_id, offset).encode()


def attach_receipt_handles(msgs: list[MessageExt], header: dict[str, object], broker: str) -> None:
    """Each message's receipt handle (``extraInfo``) from a POP answer's header, as RocketMQ 5's
    ``processPopResponse`` builds it: the checkpoint start of its ``retry@queueId`` from ``startOffsetInfo``,
    its offset from ``msgOffsetInfo`` at its place among that key's messages."""
    start = parse_offset_info(str(header.get("startOffsetInfo") or ""))
    offsets = {k: v.split(",") for k, v in parse_offset_info(str(header.get("msgOffsetInfo") or "")).items()}
    pop_time, invisible = int(str(header["popTime"])), int(str(header["invisibleTime"]))
    revive_qid = int(str(header["reviveQid"]))
    seen: dict[str, int] = {}
    for m in msgs:
        retry = retry_mark(m.topic)
        key = f"{retry}@{m.queue_id}"
        index = seen.get(key, 0)
        seen[key] = index + 1
        msg_offset = int(offsets[key][index]) if key in offsets else m.queue_offset
        m.receipt_handle = ExtraInfo(int(start.get(key, m.queue_offset)), pop_time, invisible, revive_qid, retry,
                                     broker, m.queue_id, msg_offset).encode()
