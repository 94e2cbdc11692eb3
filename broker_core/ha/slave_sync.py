"""A slave's copy of its master's metadata (upstream ``SlaveSynchronize``, reference §8.5).

Every ``slaveSynchronizeInterval`` (10 s, first after 3 s) the slave asks the master it learned from the name
server (``masterAddr``), on the master's broker port, for:

- 21 GET_ALL_TOPIC_CONFIG: the topic table, replaced when the master's ``dataVersion`` differs from the one
  last copied;
- 43 GET_ALL_CONSUMER_OFFSET: merged into the slave's offsets every time (the master's value wins per queue);
- 45 GET_ALL_DELAY_OFFSET: the delay levels' progress, given to the store (``delayOffset.json``);
- 201 GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the group table, replaced when its ``dataVersion`` differs.

A failed round is logged and retried on the next tick; whatever was copied before stays. While the master is
down the slave keeps what it has, and takes offset commits from consumers in memory (``consume.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from typing import TYPE_CHECKING, Any

from broker_core.codec.fastjson import items, loads_fastjson
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient
from broker_core.server.state import SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from broker_core.server.ports import HaHost

log = logging.getLogger(__name__)

FIRST_DELAY_S = 3.0


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()


def _dataclass_from(cls: Any, raw: Any) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in ((_snake(str(k)), v) for k, v in items(raw)) if k in known})


def _version(doc: dict[str, Any]) -> tuple[int, int]:
    v = doc.get("dataVersion") or {}
    return (int(v.get("counter", 0)), int(v.get("timestamp", 0))) if isinstance(v, dict) else (0, 0)


class SlaveSynchronize:
    def __init__(self, ctl: HaHost, client: RemotingClient) -> None:
        self.ctl = ctl
        self.client = client
        self.topic_version: tuple[int, int] | None = None
        self.group_version: tuple[int, int] | None = None
        self.last_sync_ms = 0
        self.rounds = 0

    async def run(self) -> None:
        await asyncio.sleep(FIRST_DELAY_S)
        while True:
            addr = self.ctl.master_addr
            if addr:
                try:
                    await self.sync_all(addr)
                except (ConnectionError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                    log.warning("slave sync from master %s failed: %s", addr, exc)
            await asyncio.sleep(self.ctl.config.ha.slave_synchronize_interval_ms / 1000)

    async def _get(self, addr: str, code: int) -> bytes:
        resp = await self.client.invoke(addr, RemotingCommand.request(code, {}), 5.0)
        if resp.code != ResponseCode.SUCCESS:
            raise ValueError(f"master {addr} answered code {resp.code} to {code}: {resp.remark}")
        return resp.body or b""

    async def sync_all(self, addr: str) -> None:
        await self._topics(loads_fastjson(await self._get(addr, RequestCode.GET_ALL_TOPIC_CONFIG)))
        self._offsets(loads_fastjson(await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)))
        delay = loads_fastjson(await self._get(addr, RequestCode.GET_ALL_DELAY_OFFSET))
        self.ctl.store.set_delay_offsets({int(k): int(v) for k, v in items(delay.get("offsetTable") or {})})
        self._groups(loads_fastjson(await self._get(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)))
        self.rounds += 1
        self.last_sync_ms = int(asyncio.get_running_loop().time() * 1000)

    async def _topics(self, doc: dict[str, Any]) -> None:
        version = _version(doc)
        if version == self.topic_version:
            return
        theirs = {str(name): _dataclass_from(TopicConfig, cfg) for name, cfg in items(doc.get("topicConfigTable")
                                                                                       or {})}
        topics = self.ctl.topics
        # one table change, one topics.json write (written off the loop), whatever the count: 50k topics copied
        # one upsert at a time were 50k file writes
        upserts = {name: cfg for name, cfg in theirs.items() if topics.get(name) != cfg}
        gone = [n for n in topics.table if n not in theirs]
        if upserts or gone:
            await topics.durable(topics.change(upserts, gone))
        self.topic_version = version
        log.info("slave copied %d topic configs from its master (dataVersion %s)", len(theirs), version[0])

    def _offsets(self, doc: dict[str, Any]) -> None:
        offsets = self.ctl.offsets
        for key, queues in items(doc.get("offsetTable") or {}):
            topic, _, group = str(key).partition("@")
            for queue_id, offset in items(queues):
                if offsets.query(group, topic, int(queue_id)) != int(offset):
                    offsets.commit(group, topic, int(queue_id), int(offset))

    def _groups(self, doc: dict[str, Any]) -> None:
        version = _version(doc)
        if version == self.group_version:
            return
        theirs = {str(name): _dataclass_from(SubscriptionGroupConfig, cfg)
                  for name, cfg in items(doc.get("subscriptionGroupTable") or {})}
        groups = self.ctl.groups
        groups.change({name: cfg for name, cfg in theirs.items() if groups.table.get(name) != cfg},
                      [n for n in groups.table if n not in theirs])
        self.group_version = version
