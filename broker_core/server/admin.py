"""Admin requests (RocketMQ's ``AdminBrokerProcessor``) with RocketMQ 4.9's headers and bodies, so ``mqadmin``,
the RocketMQ dashboard and the Go/Java admin APIs work against this broker (reference §2.3, §5):

- topics: 17 UPDATE_AND_CREATE_TOPIC, 215 DELETE_TOPIC_IN_BROKER (success when absent, as Java), 21
  GET_ALL_TOPIC_CONFIG (``TopicConfigSerializeWrapper``), 202 GET_TOPIC_STATS_INFO (``TopicStatsTable``), 300
  QUERY_TOPIC_CONSUME_BY_WHO (``GroupList``), 305 GET_SYSTEM_TOPIC_LIST_FROM_BROKER (``TopicList``);
- broker: 25 UPDATE_BROKER_CONFIG / 26 GET_BROKER_CONFIG (properties text), 28 GET_BROKER_RUNTIME_INFO
  (``KVTable``, RocketMQ's keys plus this broker's own);
- offsets and groups: 43 GET_ALL_CONSUMER_OFFSET, 45 GET_ALL_DELAY_OFFSET, 200 / 201 / 207 subscription
  groups, 203 GET_CONSUMER_CONNECTION_LIST (206 when nobody is online), 204 GET_PRODUCER_CONNECTION_LIST,
  208 GET_CONSUME_STATS (``ConsumeStats``), 222 INVOKE_BROKER_TO_RESET_OFFSET;
Messages (12 QUERY_MESSAGE, 33 VIEW_MESSAGE_BY_ID) and this broker's own maintenance codes are in
:mod:`broker_core.server.admin_store`.

Maps keyed by ``MessageQueue`` are written in fastjson's object-key form. Where this broker knows more than the
Java body carries (lag, min offset, each member's subscriptions), it adds keys, which Java (fastjson) and Go
(encoding/json) readers ignore.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from broker_core import __version__
from broker_core.codec.fastjson import FastjsonPairs, dumps_fastjson, loads_fastjson
from broker_core.codec.properties_file import parse_properties
from broker_core.config import SECRET_KEYS, BrokerConfig, ConfigError
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.bodies import encode_reset_offset_body
from broker_core.protocol.command import CURRENT_VERSION
from broker_core.protocol.fields import BadRequest, bool_field, int_field, str_field
from broker_core.protocol.validation import SYSTEM_TOPICS, topic_error
from broker_core.remoting.server import Connection, Handler
from broker_core.server.state import DEFAULT_PERM, SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

# Keys UPDATE_BROKER_CONFIG refuses: identity, addresses and file layout only take effect at start.
FIXED_KEYS = frozenset({
    "brokerClusterName", "brokerName", "brokerId", "brokerRole", "brokerIP1", "listenPort", "storePathRootDir",
    "storePathCommitLog", "storePathConsumeQueue", "storePathIndex", "storeCheckpoint", "abortFile",
    "mapedFileSizeCommitLog", "mappedFileSizeCommitLog", "mapedFileSizeConsumeQueue",
    "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum", "namesrvAddr"})


def json_body(data: object) -> bytes:
    return json.dumps(data, default=str, separators=(",", ":"), ensure_ascii=False).encode()


def _mq(topic: str, broker_name: str, queue_id: int) -> tuple[tuple[str, Any], ...]:
    return (("brokerName", broker_name), ("queueId", queue_id), ("topic", topic))


def _java_str(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def config_properties(cfg: BrokerConfig) -> dict[str, str]:
    """GET_BROKER_CONFIG's properties: every key, flat, as Java prints it, sorted; secrets left out."""
    return {k: _java_str(v) for k, v in sorted(cfg.properties().items()) if k not in SECRET_KEYS}


class AdminProcessor:
    """The admin codes; state comes from the controller's managers and the store's facade."""

    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.store = ctl.store
        self.config_version = {"counter": 0, "timestamp": int(time.time() * 1000)}

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics, RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topics,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_config, RequestCode.GET_BROKER_CONFIG: self.get_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_offsets, RequestCode.GET_ALL_DELAY_OFFSET: self.delay_offsets,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
        }

    # ------------------------------------------------------------------ topics
    async def create_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """17: ``topic, defaultTopic, readQueueNums, writeQueueNums, perm, topicFilterType, [topicSysFlag], order``."""
        h = cmd.header
        topic = str_field(h, "topic")
        err = topic_error(topic)
        if err:
            return cmd.response(ResponseCode.SYSTEM_ERROR, err)
        if topic == self.ctl.config.broker_cluster_name:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The topic[{topic}] is conflict with system reserved words.")
        read, write = int_field(h, "readQueueNums", 4), int_field(h, "writeQueueNums", 4)
        perm = int_field(h, "perm", DEFAULT_PERM)
        if not (1 <= read <= 1024 and 1 <= write <= 1024) or perm & ~15:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "queue counts must be 1..1024 and perm a 4-bit value")
        filter_type = str(h.get("topicFilterType") or "SINGLE_TAG")
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "topicFilterType must be SINGLE_TAG or MULTI_TAG")
        topics = self.ctl.topics
        # in memory at once; answered once topics.json holds it (written off the loop, bursts coalesced) and
        # the name servers were told (concurrent requests share one registration)
        await topics.durable(topics.change({topic: TopicConfig(topic, read, write, perm, bool_field(h, "order"),
                                                               filter_type, int_field(h, "topicSysFlag", 0))}, ()))
        await self.ctl.register_all()
        return cmd.response(ResponseCode.SUCCESS)

    async def delete_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """215: removes the config, offsets and files; a topic this broker does not hold is a success (admin tools
        send the request to every master of the cluster)."""
        topic = str_field(cmd.header, "topic")
        topics = self.ctl.topics
        held = topics.get(topic) is not None
        if held:
            await topics.durable(topics.change({}, (topic,)))
        if held or self.store.queue_ids(topic):
            await asyncio.get_running_loop().run_in_executor(None, self.store.delete_topic, topic)
            self.ctl.offsets.remove_topic(topic)
            await self.ctl.register_all()
        return cmd.response(ResponseCode.SUCCESS)

    def all_topics(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.ctl.topics.encode().encode())

    def _queues(self, topic: str) -> range | list[int]:
        cfg = self.ctl.topics.get(topic)
        return range(cfg.write_queue_nums) if cfg else self.store.queue_ids(topic)

    def topic_stats(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """202: ``TopicStatsTable`` ``{"offsetTable":{<mq>:{"lastUpdateTimestamp","maxOffset","minOffset"}}}``."""
        topic = str_field(cmd.header, "topic")
        if self.ctl.topics.get(topic) is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store, name = self.store, self.ctl.config.broker_name
        table = FastjsonPairs()
        for q in self._queues(topic):
            lo, hi = store.get_min_offset_in_queue(topic, q), store.get_max_offset_in_queue(topic, q)
            table.append((_mq(topic, name, q), {
                "lastUpdateTimestamp": store.get_queue_store_time(topic, q, hi - 1) if hi > 0 else 0,
                "maxOffset": hi, "minOffset": lo}))
        return cmd.response(ResponseCode.SUCCESS, body=dumps_fastjson({"offsetTable": table}).encode())

    def consumed_by(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """300: ``GroupList`` of groups subscribing online or holding offsets on ``topic``."""
        topic = str_field(cmd.header, "topic")
        groups = set(self.ctl.offsets.groups_of(topic))
        groups |= {g for g, members in self.ctl.consumers.groups.items()
                   if any(topic in m.subscriptions for m in members.values())}
        return cmd.response(ResponseCode.SUCCESS, body=json_body({"groupList": sorted(groups)}))

    def system_topics(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """305: ``TopicList`` of the system topics this broker holds, with its cluster and broker names."""
        cfg = self.ctl.config
        names = {t for t in self.ctl.topics.table if t in SYSTEM_TOPICS}
        names |= {cfg.broker_cluster_name, cfg.broker_name}
        return cmd.response(ResponseCode.SUCCESS, body=json_body({"topicList": sorted(names)}))

    # ------------------------------------------------------------------ broker
    def _properties(self) -> dict[str, str]:
        return config_properties(self.ctl.config)

    def get_config(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """26: every setting as ``key=value`` lines; header ``version`` is the config's DataVersion JSON."""
        body = "".join(f"{k}={v}\n" for k, v in self._properties().items()).encode()
        return cmd.response(ResponseCode.SUCCESS, "", {"version": json.dumps(self.config_version,
                                                                             separators=(",", ":"))}, body)

    def update_config(self, cmd: RemotingCommand,
                      conn: Connection) -> RemotingCommand | Coroutine[Any, Any, RemotingCommand]:
        """25: body = properties text; known keys take effect in memory (not written back to the config file);
        unknown keys are ignored as Java does; identity, address and layout keys are refused, except
        ``brokerRole=ASYNC_MASTER|SYNC_MASTER`` alone sent to a slave: its promotion by hand (README)."""
        try:
            props = parse_properties(cmd.body.decode("utf-8"), "UPDATE_BROKER_CONFIG")
        except UnicodeDecodeError:
            raise BadRequest("the body is not UTF-8 properties text") from None
        if set(props) == {"brokerRole"} and self.ctl.ha.is_slave:
            return self._promote(cmd, props["brokerRole"].strip())
        fixed = sorted(k for k in props if k in FIXED_KEYS)
        if fixed:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not be changed while running: {', '.join(fixed)}")
        cfg = self.ctl.config
        try:
            updates = BrokerConfig.parse_updates(props)
            trial = cfg.copy()
            for key, value in updates.items():
                trial.set(key, value)
            trial.validate()
        except ConfigError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if "clockOffsetMs" in updates:
            if self.ctl.clock is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, "this broker's clock cannot be shifted while running")
            self.ctl.clock.offset_ms = updates["clockOffsetMs"]  # for rehearsals: delays fall due, hours arrive
        for key, value in updates.items():
            cfg.set(key, value)  # in its section, which the services given that section see
        self.config_version = {"counter": self.config_version["counter"] + 1, "timestamp": int(time.time() * 1000)}
        return cmd.response(ResponseCode.SUCCESS)

    async def _promote(self, cmd: RemotingCommand, role: str) -> RemotingCommand:
        try:
            await self.ctl.ha.promote(role)
        except ValueError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.config_version = {"counter": self.config_version["counter"] + 1, "timestamp": int(time.time() * 1000)}
        await self.ctl.register_all()  # the name server lists it as brokerId 0 now
        return cmd.response(ResponseCode.SUCCESS)

    def runtime_info(self) -> dict[str, object]:
        """RocketMQ's runtime keys (``brokerVersion``, ``commitLogMaxOffset``, ``putTps`` ...) and this broker's."""
        ctl, store = self.ctl, self.store
        own = ctl.runtime_info()
        put_tps, get_tps = ctl.stats.tps()
        disk = store.check_disk()
        java = {
            "brokerVersionDesc": "V4_9_4", "brokerVersion": CURRENT_VERSION, "brokerActive": True,
            "bootTimestamp": int((time.time() - (time.monotonic() - ctl.stats.started)) * 1000),
            "commitLogMaxOffset": own.get("commit_log_max_offset", 0),
            "commitLogMinOffset": own.get("commit_log_min_offset", 0),
            "commitLogDiskRatio": round(disk.ratio, 4), "dispatchBehindBytes": own.get("dispatch_behind_bytes", 0),
            "msgPutTotalTodayNow": ctl.stats.put_count, "msgGetTotalTodayNow": ctl.stats.get_count,
            "getTransferedTps": f"{get_tps:.1f}", "putTps": f"{put_tps:.1f}", "getTotalTps": f"{get_tps:.1f}",
            "serverVersion": __version__,
        }
        return {**java, **own}

    def runtime(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """28: ``KVTable`` ``{"table":{key: string}}``."""
        table = {k: _java_str(v) for k, v in sorted(self.runtime_info().items())}
        return cmd.response(ResponseCode.SUCCESS, body=json_body({"table": table}))

    # ------------------------------------------------------------------ offsets and groups
    def all_offsets(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """43: ``ConsumerOffsetSerializeWrapper``, the content of ``consumerOffset.json``."""
        return cmd.response(ResponseCode.SUCCESS, body=self.ctl.offsets.encode().encode())

    def delay_offsets(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """45: the text of ``delayOffset.json`` (``{"offsetTable":{level:offset}}``)."""
        text = dumps_fastjson({"offsetTable": self.store.delay_offsets()}, pretty=True)
        return cmd.response(ResponseCode.SUCCESS, body=text.encode())

    def create_group(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """200: body ``SubscriptionGroupConfig`` JSON."""
        try:
            doc = loads_fastjson(cmd.body)
            if not isinstance(doc, dict):
                raise ValueError("expected an object")
            name = str(doc["groupName"])
            fields = {f.name for f in dataclasses.fields(SubscriptionGroupConfig)}
            snake = {"".join("_" + c.lower() if c.isupper() else c for c in k): v for k, v in doc.items()}
            cfg = SubscriptionGroupConfig(**{k: v for k, v in snake.items() if k in fields and k != "group_name"},
                                          group_name=name)
        except (ValueError, KeyError, TypeError) as exc:
            raise BadRequest(f"bad SubscriptionGroupConfig body: {exc}") from None
        if topic_error(name):
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the group name {name!r} is not valid")
        self.ctl.groups.upsert(cfg)
        return cmd.response(ResponseCode.SUCCESS)

    def all_groups(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """201: ``SubscriptionGroupWrapper``, the content of ``subscriptionGroup.json``."""
        return cmd.response(ResponseCode.SUCCESS, body=self.ctl.groups.encode().encode())

    def delete_group(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """207: header ``groupName``; success whether or not the group existed, as Java."""
        self.ctl.groups.delete(str_field(cmd.header, "groupName"))
        return cmd.response(ResponseCode.SUCCESS)

    def consumer_connections(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """203: ``ConsumerConnection``; 206 CONSUMER_NOT_ONLINE when no member is connected."""
        group = str_field(cmd.header, "consumerGroup")
        body = self.ctl.consumers.consumer_connection(group)
        if body is None:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return cmd.response(ResponseCode.SUCCESS, body=json_body(body))

    def producer_connections(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """204: ``ProducerConnection``; SYSTEM_ERROR when no producer of the group is connected."""
        group = str_field(cmd.header, "producerGroup")
        body = self.ctl.consumers.producer_connection(group)
        if body is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return cmd.response(ResponseCode.SUCCESS, body=json_body(body))

    def consume_stats(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """208: ``ConsumeStats`` for ``consumerGroup`` on ``topic`` or every topic it committed offsets on:
        ``{"consumeTps":x,"offsetTable":{<mq>:{"brokerOffset","consumerOffset","lastTimestamp"}}}``.
        ``consumerOffset`` is 0 when never committed (as Java); each value also carries ``committed`` (-1 then),
        ``minOffset``, ``lag`` (from the min offset when never committed) and ``lastUpdateTimestamp``; the top
        level carries ``online`` (client ids)."""
        h = cmd.header
        group = str_field(h, "consumerGroup")
        topic = h.get("topic")
        topics = [str(topic)] if topic else self.ctl.offsets.topics_of(group)
        store, name = self.store, self.ctl.config.broker_name
        table = FastjsonPairs()
        for t in topics:
            if self.ctl.topics.get(t) is None and not store.queue_ids(t):
                continue
            for q in self._queues(t):
                hi, lo = store.get_max_offset_in_queue(t, q), store.get_min_offset_in_queue(t, q)
                committed = self.ctl.offsets.query(group, t, q)
                table.append((_mq(t, name, q), {
                    "brokerOffset": hi, "consumerOffset": max(committed, 0),
                    "lastTimestamp": store.get_queue_store_time(t, q, committed - 1) if committed > 0 else 0,
                    "committed": committed, "minOffset": lo, "lag": hi - (committed if committed >= 0 else lo),
                    "lastUpdateTimestamp": store.get_queue_store_time(t, q, hi - 1) if hi > 0 else 0}))
        _put, get_tps = self.ctl.stats.tps()
        body = {"consumeTps": round(get_tps, 1), "offsetTable": table,
                "online": self.ctl.consumers.client_ids(group)}
        return cmd.response(ResponseCode.SUCCESS, body=dumps_fastjson(body).encode())

    async def reset_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """222: header ``topic, group, timestamp, isForce`` (timestamp -1 = latest, 0 = earliest, as the SDK
        uses it); an optional body ``{"offsets":{queueId: offset}}`` (this broker's own) sets exact offsets.
        Answers ``ResetOffsetBody`` and tells the group's clients (220)."""
        ctl, store = self.ctl, self.store
        h = cmd.header
        group, topic = str_field(h, "group"), str_field(h, "topic")
        cfg = ctl.topics.get(topic)
        if cfg is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        offsets: dict[int, int] = {}
        if cmd.body:
            try:
                offsets = {int(q): int(o) for q, o in json.loads(cmd.body)["offsets"].items()}
            except (ValueError, KeyError, TypeError) as exc:
                raise BadRequest(f"bad offsets body: {exc}") from None
        else:
            ts = int_field(h, "timestamp")
            for q in range(cfg.read_queue_nums):
                if ts == -1:
                    offsets[q] = store.get_max_offset_in_queue(topic, q)
                elif ts == 0:
                    offsets[q] = store.get_min_offset_in_queue(topic, q)
                else:
                    offsets[q] = store.get_offset_in_queue_by_time(topic, q, ts)
        for q, o in offsets.items():
            lo, hi = store.get_min_offset_in_queue(topic, q), store.get_max_offset_in_queue(topic, q)
            ctl.offsets.commit(group, topic, q, min(max(o, lo), hi))
        applied = {q: ctl.offsets.query(group, topic, q) for q in offsets}
        ctl.offsets.persist()
        ctl.consumers.notify_reset(group, topic, ctl.config.broker_name, applied, int_field(h, "timestamp", -1),
                                   bool_field(h, "isForce", True), for_c=cmd.language == "CPP")
        return cmd.response(ResponseCode.SUCCESS, body=encode_reset_offset_body(topic, ctl.config.broker_name, applied))
