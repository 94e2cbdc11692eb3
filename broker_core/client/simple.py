"""SimpleConsumer: stateless receive/ack consumption (POP style).

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
import json

from broker_core.client.consumer import _ConsumerBase
from broker_core.client.instance import ClientInstance
from broker_core.client.message import ClientError, MessageExt, decode_message_exts
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.filter import Subscription, parse_subscription
from broker_core.remoting.client import run_sync


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
            header = {"consumerGroup": self.group, "topic": sub.topic, "maxMsgNums": max_num,
                      "invisibleTime": int(invisible_duration * 1000), "pollTime": int(wait * 1000) if last else 0,
                      "expression": sub.expression, "expressionType": sub.expression_type,
                      "maxReconsumeTimes": self.max_reconsume_times}
            resp = await self.instance.invoke(self.instance.broker_addr(broker),
                                              RemotingCommand.request(RequestCode.POP_MESSAGE, header), wait + 5)
            if resp.code == ResponseCode.SUCCESS:
                msgs = decode_message_exts(resp.body, broker)
                for m, meta in zip(msgs, json.loads(str(resp.header["messages"])), strict=True):
                    m.receipt_handle = str(meta["handle"])
                    m.reconsume_times = int(meta["reconsumeTimes"])
                return [m for m in msgs if sub.matches_message(m.properties)]
            if resp.code != ResponseCode.PULL_NOT_FOUND:
                raise ClientError(resp.code, resp.remark)
        return []

    def _handle_request(self, msg: MessageExt, code: int, extra: dict[str, object]) -> RemotingCommand:
        if not msg.receipt_handle:
            raise ValueError("message has no receipt handle (was it received by a SimpleConsumer?)")

        async def go() -> RemotingCommand:
            await self.instance.route(msg.topic)
            return await self.instance.invoke(self.instance.broker_addr(msg.broker_name), RemotingCommand.request(
                code, {"consumerGroup": self.group, "receiptHandle": msg.receipt_handle, **extra}))
        resp = run_sync(go())
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)
        return resp

    def ack(self, msg: MessageExt) -> None:
        """Finish ``msg``. Raises ClientError if its handle expired or was already used."""
        self._handle_request(msg, RequestCode.ACK_MESSAGE, {})

    def change_invisible_duration(self, msg: MessageExt, seconds: float) -> None:
        resp = self._handle_request(msg, RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                    {"invisibleTime": int(seconds * 1000)})
        msg.receipt_handle = str(resp.header["receiptHandle"])
