"""UPDATE_AND_CREATE_TOPIC_LIST (18, RocketMQ 5): many topics created or updated by one request.

Body ``CreateTopicListRequestBody`` ``{"topicConfigList":[TopicConfig, ...]}`` (each TopicConfig with RocketMQ's
keys: ``topicName, readQueueNums, writeQueueNums, perm, topicFilterType, topicSysFlag, order``; others such as
5.x ``attributes`` are ignored). Every entry is checked first: one bad entry refuses the whole request
(SYSTEM_ERROR naming it) and changes nothing. Then one table update, one ``topics.json`` write, one
DataVersion step and one registration with the name servers, where code 17 pays all three per topic (the cost
of creating 50k topics one at a time grows with the count: each write and registration is a join of cached
per-topic text, done off the event loop; see :mod:`broker_core.server.topics_file`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker_core.codec.fastjson import FastjsonPairs, items, loads_fastjson
from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.protocol.validation import topic_error
from broker_core.remoting.server import Connection, Handler
from broker_core.server.state import DEFAULT_PERM, TopicConfig

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

UPDATE_AND_CREATE_TOPIC_LIST = 18


def _int(doc: dict[str, Any], key: str, default: int) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).lstrip("-").isdigit():
        raise ValueError(f"{key} must be an integer, got {value!r}")
    return int(value)


def topic_config(doc: object, cluster_name: str) -> TopicConfig:
    """One ``TopicConfig`` of the list, checked as code 17 checks its header; ValueError names the problem."""
    if isinstance(doc, FastjsonPairs):
        doc = dict(items(doc))
    if not isinstance(doc, dict):
        raise ValueError("each topicConfigList entry must be an object")
    name = str(doc.get("topicName") or "")
    err = topic_error(name)
    if err:
        raise ValueError(err)
    if name == cluster_name:
        raise ValueError(f"The topic[{name}] is conflict with system reserved words.")
    read, write = _int(doc, "readQueueNums", 16), _int(doc, "writeQueueNums", 16)
    perm = _int(doc, "perm", DEFAULT_PERM)
    if not (1 <= read <= 1024 and 1 <= write <= 1024) or perm & ~15 or perm < 0:
        raise ValueError(f"{name}: queue counts must be 1..1024 and perm a 4-bit value")
    filter_type = str(doc.get("topicFilterType") or "SINGLE_TAG")
    if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
        raise ValueError(f"{name}: topicFilterType must be SINGLE_TAG or MULTI_TAG")
    return TopicConfig(name, read, write, perm, doc.get("order") in (True, "true"), filter_type,
                       _int(doc, "topicSysFlag", 0))


class TopicBatchProcessor:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl

    def handlers(self) -> dict[int, Handler]:
        return {UPDATE_AND_CREATE_TOPIC_LIST: self.create_topic_list}

    async def create_topic_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            doc = loads_fastjson(cmd.body) if cmd.body else None
            if isinstance(doc, FastjsonPairs):
                doc = dict(items(doc))
            entries = doc.get("topicConfigList") if isinstance(doc, dict) else None
            if not isinstance(entries, list) or not entries:
                raise ValueError("body must be {\"topicConfigList\":[TopicConfig, ...]} with at least one entry")
            cfgs = [topic_config(entry, self.ctl.config.broker_cluster_name) for entry in entries]
        except (UnicodeDecodeError, ValueError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        # one table copy and DataVersion step here; topics.json is written off the event loop (a burst of
        # requests becomes one write) and the answer waits until it is synced, then for the registration
        topics = self.ctl.topics
        await topics.durable(topics.change({cfg.topic_name: cfg for cfg in cfgs}, ()))
        await self.ctl.register_all()
        return cmd.response(ResponseCode.SUCCESS)
