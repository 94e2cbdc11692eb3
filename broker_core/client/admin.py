"""AdminClient: topics, cluster and broker status, queue offsets, group offsets and lag, offset reset,
lookups by message id and key, and the store's maintenance operations.

Its plumbing (the shared ClientInstance, ``credentials`` for ACL-enabled brokers) is in ``admin_base.py``; dead
letters, delays, store maintenance and segment snapshots are in ``admin_store.py``; the operator calls ``mqadmin``
makes (groups, connections, write permission, ACL 1.0, any code by :meth:`request`) in ``admin_ops.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from broker_core.client.admin_acl import AclAdminMixin
from broker_core.client.admin_consumers import ConsumerAdminMixin
from broker_core.client.admin_export import ExportAdminMixin
from broker_core.client.admin_ops import OpsAdminMixin
from broker_core.client.admin_store import StoreAdminMixin
from broker_core.client.consumer import decode_records
from broker_core.client.instance import decode_route
from broker_core.client.message import ClientError, MessageExt
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.codec.names import ADMIN_GROUP
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.bodies import decode_mq_offset_table, items, loads_fastjson
from broker_core.protocol.validation import topic_error

__all__ = ["ADMIN_GROUP", "AdminClient"]


class AdminClient(StoreAdminMixin, OpsAdminMixin, ConsumerAdminMixin, AclAdminMixin, ExportAdminMixin):
    """The admin operations; ``AdminClient(namesrv_addr, timeout=5.0, instance=None, credentials=None)``."""

    # ------------------------------------------------------------------ cluster
    def cluster_info(self) -> dict[str, Any]:
        return self._run(self._cluster())

    def broker_runtime(self, broker_addr: str) -> dict[str, Any]:
        """GET_BROKER_RUNTIME_INFO's ``KVTable`` with numbers and booleans parsed back from their strings."""
        async def go() -> dict[str, Any]:
            body = json.loads((await self._call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body)
            return {k: _scalar(v) for k, v in body.get("table", {}).items()}
        return self._run(go())

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting of the broker as ``{key: value}`` text."""
        async def go() -> dict[str, str]:
            text = (await self._call(broker_addr, RequestCode.GET_BROKER_CONFIG)).body.decode()
            return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        return self._run(go())

    def update_broker_config(self, broker_addr: str, settings: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: apply ``settings`` in the broker's memory (not written to its config file)."""
        body = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()

        async def go() -> None:
            await self._call(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, {}, body)
        self._run(go())

    def topic_list(self) -> list[str]:
        async def go() -> list[str]:
            body = loads_fastjson((await self._ns(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
            return sorted(str(t) for t in body.get("topicList") or [])  # a Java TopicList is an unordered set
        return self._run(go())

    def auto_created_topics(self) -> set[str]:
        """Topics some master created on a first send (``autoCreateTopicEnable``), from GET_ALL_TOPIC_CONFIG."""
        async def go() -> set[str]:
            found: set[str] = set()
            for _name, addr in sorted((await self._master_addrs()).items()):
                body = loads_fastjson((await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
                found |= {str(t) for t, cfg in items(body.get("topicConfigTable") or {})
                          if isinstance(cfg, dict) and cfg.get("autoCreated") is True}
            return found
        return self._run(go())

    def topic_config_versions(self) -> dict[str, Any]:
        """What the name server last registered of each broker, a few hundred bytes whatever the topic count:
        ``{"cluster": ClusterInfo's brokerAddrTable, "versions": {broker addr: its topic config DataVersion or
        None}}``. Equal answers mean no broker's topics (and so the name server's topic list) changed. Read-only:
        QUERY_DATA_VERSION is sent with a DataVersion no broker has (counter -1), so the name server answers
        ``changed`` and refreshes no broker's heartbeat (it does that only for an unchanged version)."""
        never = json.dumps({"counter": -1, "stateVersion": 0, "timestamp": 0}).encode()

        async def go() -> dict[str, Any]:
            table = (await self._cluster()).get("brokerAddrTable", {})
            cluster_of = {name: data.get("cluster", "") for name, data in table.items()}
            versions: dict[str, Any] = {}
            for name, data in sorted(table.items()):
                for broker_id, addr in sorted(data.get("brokerAddrs", {}).items()):
                    header = {"brokerAddr": addr, "brokerName": name, "clusterName": cluster_of[name],
                              "brokerId": broker_id}
                    resp = await self.instance.invoke_namesrv(
                        RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, header, never), self.timeout)
                    if resp.code != ResponseCode.SUCCESS:
                        raise ClientError(resp.code, resp.remark)
                    versions[addr] = loads_fastjson(resp.body) if resp.body else None
            return {"cluster": table, "versions": versions}
        return self._run(go())

    def topic_route(self, topic: str) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            return decode_route((await self._ns(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).body)
        return self._run(go())

    # ------------------------------------------------------------------ topics
    def create_topic(self, topic: str, read_queue_nums: int = 4, write_queue_nums: int = 4, perm: int = 6,
                     *, cluster: str | None = None, brokers: list[str] | None = None, order: bool = False) -> list[str]:
        """Create or update ``topic`` on the chosen brokers (default: every master). Returns the broker names."""
        err = topic_error(topic)
        if err:
            raise ValueError(err)

        async def go() -> list[str]:
            targets = await self._master_addrs(cluster, brokers)
            if not targets:
                raise ClientError(int(ResponseCode.SYSTEM_ERROR), "no broker matches the selection")
            header = {"topic": topic, "readQueueNums": read_queue_nums, "writeQueueNums": write_queue_nums,
                      "perm": perm, "order": order}
            for addr in targets.values():
                await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
            self.instance.routes.pop(topic, None)
            return sorted(targets)
        return self._run(go())

    update_topic = create_topic

    def delete_topic(self, topic: str) -> None:
        async def go() -> None:
            for addr in (await self._master_addrs()).values():
                await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic},
                                 ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
            await self._ns(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
            self.instance.routes.pop(topic, None)
        self._run(go())

    def topic_stats(self, topic: str) -> list[dict[str, Any]]:
        """Per queue (GET_TOPIC_STATS_INFO's ``TopicStatsTable``): broker, topic, queue id, min/max offset, last
        update time."""
        async def go() -> list[dict[str, Any]]:
            rows = []
            for name, addr in sorted((await self._topic_brokers(topic)).items()):
                resp = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
                for (t, _b, q), v in sorted(decode_mq_offset_table(resp.body).items(), key=lambda kv: kv[0][2]):
                    rows.append({"brokerName": name, "topic": t, "queueId": q, "minOffset": int(v["minOffset"]),
                                 "maxOffset": int(v["maxOffset"]),
                                 "lastUpdateTimestamp": int(v.get("lastUpdateTimestamp", 0))})
            return rows
        return self._run(go())

    # ------------------------------------------------------------------ groups
    def consume_stats(self, group: str, topic: str | None = None) -> dict[str, Any]:
        """Per queue committed offset and lag (GET_CONSUME_STATS's ``ConsumeStats``), the total lag and the online
        clients, the ``consumeTps`` the brokers report. ``consumerOffset`` is -1 where the group never committed."""
        async def go() -> dict[str, Any]:
            return await self._consume_stats(group, topic, await (
                self._topic_brokers(topic) if topic else self._master_addrs()))
        return self._run(go())

    def consume_stats_many(self, groups: list[str]) -> dict[str, dict[str, Any] | ClientError]:
        """:meth:`consume_stats` (every topic) of each of ``groups``, the requests to the masters all in flight at
        once (a page of a group list: one round trip's wait instead of one per group and master); a group whose
        request a broker refused maps to that ``ClientError``. Read-only."""
        async def one(group: str, brokers: dict[str, str]) -> dict[str, Any] | ClientError:
            try:
                return await self._consume_stats(group, None, brokers)
            except ClientError as exc:
                return exc

        async def go() -> dict[str, dict[str, Any] | ClientError]:
            brokers = await self._master_addrs()
            found = await asyncio.gather(*(one(g, brokers) for g in groups))
            return dict(zip(groups, found, strict=True))
        return self._run(go())

    async def _consume_stats(self, group: str, topic: str | None, brokers: dict[str, str]) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        online: set[str] = set()
        tps = 0.0
        for name, addr in sorted(brokers.items()):
            header = {"consumerGroup": group, **({"topic": topic} if topic else {})}
            body = (await self._call(addr, RequestCode.GET_CONSUME_STATS, header)).body
            for (t, _b, q), v in sorted(decode_mq_offset_table(body).items()):
                committed = int(v.get("committed", v["consumerOffset"]))
                broker_offset = int(v["brokerOffset"])
                low = int(v.get("minOffset", 0))
                rows.append({
                    "brokerName": name, "topic": t, "queueId": q, "minOffset": low, "maxOffset": broker_offset,
                    "consumerOffset": committed,
                    "lag": int(v.get("lag", broker_offset - (committed if committed >= 0 else low))),
                    "lastTimestamp": int(v.get("lastTimestamp", 0)),
                    "lastUpdateTimestamp": int(v.get("lastUpdateTimestamp", 0))})
            doc = loads_fastjson(body)
            online.update(doc.get("online", []))
            tps += float(doc.get("consumeTps") or 0)
        return {"offsetTable": rows, "totalLag": sum(r["lag"] for r in rows), "online": sorted(online),
                "consumeTps": tps}

    async def _consumer_connection(self, addr: str, group: str) -> dict[str, Any] | None:
        resp = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                                ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        return json.loads(resp.body) if resp.code == ResponseCode.SUCCESS else None

    def consumer_connections(self, group: str) -> list[dict[str, Any]]:
        """The online clients of ``group`` as they registered with the masters (one row per client, merged over
        brokers): ``clientId``, ``clientAddr``, ``language``, ``version``, ``consumeType`` (PUSH...),
        ``messageModel`` (CLUSTERING or BROADCASTING), ``consumeFromWhere``, ``consumeOrderly`` (None when the
        client does not say), ``subscriptions`` ({topic: expression}) and ``brokers`` (the brokers it heartbeats
        to)."""
        async def go() -> list[dict[str, Any]]:
            clients: dict[str, dict[str, Any]] = {}
            for name, addr in sorted((await self._master_addrs()).items()):
                data = await self._consumer_connection(addr, group)
                for c in (data or {}).get("connectionSet", []):
                    row = clients.setdefault(c["clientId"], {**c, "brokers": []})
                    row["brokers"].append(name)
            return [clients[k] for k in sorted(clients)]
        return self._run(go())

    def subscriptions(self, group: str) -> dict[str, tuple[str, str]]:
        """What the online members of ``group`` subscribe to, merged over the masters' ``subscriptionTable``:
        ``{topic: (expression, expression type TAG|SQL92)}``; empty when no member is online."""
        async def go() -> dict[str, tuple[str, str]]:
            out: dict[str, tuple[str, str]] = {}
            for _name, addr in sorted((await self._master_addrs()).items()):
                data = await self._consumer_connection(addr, group)
                for topic, sub in dict((data or {}).get("subscriptionTable") or {}).items():
                    out[str(topic)] = (str(sub.get("subString") or "*"), str(sub.get("expressionType") or "TAG"))
            return out
        return self._run(go())

    def group_list(self, online: bool = True) -> dict[str, dict[str, Any]]:
        """Every consumer group a master knows, merged over masters: its subscription groups
        (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and the groups holding offsets (GET_ALL_CONSUMER_OFFSET):
        ``{group: {"brokers": [...], "offsetTopics": [...], "online": clients summed over brokers}}``.
        ``online=False``: without ``online``, two requests per master instead of one more per group and master
        (GET_CONSUMER_CONNECTION_LIST), for listing many groups."""
        async def go() -> dict[str, dict[str, Any]]:
            groups: dict[str, dict[str, Any]] = {}
            for name, addr in sorted((await self._master_addrs()).items()):
                subs = loads_fastjson((await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
                offsets = loads_fastjson((await self._call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)).body)
                topics_of: dict[str, set[str]] = {}
                for key, _queues in items(offsets.get("offsetTable", {})):
                    t, _, g = str(key).partition("@")
                    topics_of.setdefault(g, set()).add(t)
                for group in set(dict(items(subs.get("subscriptionGroupTable", {})))) | set(topics_of):
                    row = groups.setdefault(group, {"brokers": [], "offsetTopics": [], "online": 0})
                    row["brokers"].append(name)
                    row["offsetTopics"] = sorted(set(row["offsetTopics"]) | topics_of.get(group, set()))
                    if online:
                        conn = await self._consumer_connection(addr, group)
                        row["online"] += len(conn["connectionSet"]) if conn else 0
                    else:
                        row.pop("online", None)
            return dict(sorted(groups.items()))
        return self._run(go())

    def reset_offset(self, group: str, topic: str, *, timestamp_ms: int | None = None,
                     offsets: dict[tuple[str, int], int] | None = None,
                     force: bool = True) -> dict[tuple[str, int], int]:
        """Reset by time (``timestamp_ms``; 0 = earliest, -1 = latest) or to exact ``{(broker, queue): offset}``.
        Running consumers of the group are told to restart from the new offsets. ``force`` is RocketMQ's
        ``isForce`` (False: only offsets that move back)."""
        if (timestamp_ms is None) == (offsets is None):
            raise ValueError("give exactly one of timestamp_ms or offsets")

        async def go() -> dict[tuple[str, int], int]:
            out = {}
            for name, addr in sorted((await self._topic_brokers(topic)).items()):
                body = b""
                header: dict[str, Any] = {"group": group, "topic": topic, "isForce": force}
                if offsets is not None:
                    mine = {str(q): o for (b, q), o in offsets.items() if b == name}
                    if not mine:
                        continue
                    body = json.dumps({"offsets": mine}).encode()
                else:
                    header["timestamp"] = timestamp_ms
                resp = await self._call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, body)
                out.update({(name, q): int(o) for (_t, _b, q), o in decode_mq_offset_table(resp.body).items()})
            return out
        return self._run(go())

    # ------------------------------------------------------------------ messages
    def view_message(self, offset_msg_id: str) -> MessageExt:
        ip, port, phy_offset = decode_offset_msg_id(offset_msg_id)

        async def go() -> MessageExt:
            addr = f"{ip}:{port}"
            resp = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy_offset},
                                    ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
            if resp.code != ResponseCode.SUCCESS:  # RocketMQ answers a missing message with SYSTEM_ERROR
                raise ClientError(int(ResponseCode.QUERY_NOT_FOUND), resp.remark or "no message with that id")
            names = {a: n for n, a in (await self._master_addrs()).items()}
            return decode_records(resp.body, names.get(addr, addr))[0]
        return self._run(go())

    def query_message(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                      end_ms: int = (1 << 63) - 1) -> tuple[list[MessageExt], bool]:
        """Messages with ``key`` (a KEYS value or the unique id) from every broker of the topic, newest first,
        and whether any broker had more than ``max_num``."""
        async def go() -> tuple[list[MessageExt], bool]:
            found: list[MessageExt] = []
            truncated = False
            for name, addr in sorted((await self._topic_brokers(topic)).items()):
                resp = await self._call(addr, RequestCode.QUERY_MESSAGE, {
                    "topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin_ms,
                    "endTimestamp": end_ms}, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
                if resp.code == ResponseCode.SUCCESS:
                    found += decode_records(resp.body, name)
                    truncated = truncated or resp.header.get("truncated") == "true"
            found.sort(key=lambda m: m.store_timestamp, reverse=True)
            return found[:max_num], truncated or len(found) > max_num
        return self._run(go())



def _scalar(text: object) -> Any:
    """A KVTable value back as the number or boolean it was written from (other text as is)."""
    if not isinstance(text, str):
        return text
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
