"""Rebalancing (upstream ``RebalanceImpl``): which queues a push consumer should own, and the broker-side queue
locks orderly consumers hold.

- :func:`allocate`: per subscribed topic, the readable queues from the route; in CLUSTERING the group's live
  members (``GET_CONSUMER_LIST_BY_GROUP`` from the first broker that answers) are shared out by the allocation
  strategy (each queue to exactly one member, from the sorted queue and member lists, so every member computes
  the same split); in BROADCASTING every queue. The group's retry topic may not exist yet: it is skipped.
- :class:`QueueLocks`: ``LOCK_BATCH_MQ`` / ``UNLOCK_BATCH_MQ`` per broker (RocketMQ's locks expire after 60 s
  unless renewed, so the owner re-locks every ``lock_interval``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from broker_core.client.instance import ClientInstance
from broker_core.client.message import ClientError, MessageQueue
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.validation import retry_topic

log = logging.getLogger(__name__)


async def members(instance: ClientInstance, group: str, topic: str) -> list[str]:
    """The group's live client ids as a broker of ``topic`` knows them (only this client if none answers)."""
    route = await instance.route(topic)
    for broker in sorted({mq.broker_name for mq in route.read_queues}):
        try:
            addr = instance.admin_addr(broker)[0]  # the master, or a slave while it is down
            resp = await instance.invoke(addr, RemotingCommand.request(
                RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
            ids = json.loads(resp.body or b"{}").get("consumerIdList", [])
            if ids:
                return sorted(ids)
        except (ConnectionError, TimeoutError, ValueError, ClientError):
            continue
    return [instance.client_id]


async def allocate(instance: ClientInstance, group: str, topics: list[str], clustering: bool,
                   strategy: Any) -> set[MessageQueue]:
    """The queues this client should consume now. ``strategy`` is any object with
    ``allocate(client_id, queues, client_ids)`` (see :mod:`broker_core.client.allocate`)."""
    wanted: set[MessageQueue] = set()
    for topic in topics:
        try:
            route = await instance.route(topic, refresh=True)
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST and topic == retry_topic(group):
                continue
            raise
        mq_all = sorted(route.read_queues)
        if clustering:
            wanted.update(strategy.allocate(instance.client_id, mq_all, await members(instance, group, topic)))
        else:
            wanted.update(mq_all)
    return wanted


class QueueLocks:
    """The broker-side locks of (group, queue) an orderly consumer holds."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group

    async def request(self, code: int, broker: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (answers the queues now held) or UNLOCK_BATCH_MQ (answers nothing); an unreachable
        broker holds nothing for us."""
        body = json.dumps({"consumerGroup": self.group, "clientId": self.instance.client_id, "mqSet": [
            {"topic": m.topic, "brokerName": m.broker_name, "queueId": m.queue_id} for m in mqs]}).encode()
        try:
            resp = await self.instance.invoke(self.instance.broker_addr(broker),
                                              RemotingCommand.request(code, {}, body))
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("lock request to %s failed: %s", broker, exc)
            return set()
        if resp.code != ResponseCode.SUCCESS or code != RequestCode.LOCK_BATCH_MQ:
            return set()
        return {MessageQueue(m["topic"], m["brokerName"], int(m["queueId"]))
                for m in json.loads(resp.body).get("lockOKMQSet", [])}

    async def lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """Lock (or renew) ``mqs``, broker by broker; the ones now held."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        held: set[MessageQueue] = set()
        for broker, group in by_broker.items():
            held |= await self.request(RequestCode.LOCK_BATCH_MQ, broker, group)
        return held

    async def unlock(self, mq: MessageQueue) -> None:
        await self.request(RequestCode.UNLOCK_BATCH_MQ, mq.broker_name, [mq])
