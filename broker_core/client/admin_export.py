"""AdminClient's export and import of topic and subscription-group configs in RocketMQ's own JSON: the forms of a
broker's ``topics.json`` (``TopicConfigSerializeWrapper``: ``topicConfigTable``) and ``subscriptionGroup.json``
(``SubscriptionGroupWrapper``: ``subscriptionGroupTable``), so a cluster's topics and groups move between
clusters (ours or Apache RocketMQ's) as files.

Export merges every master's table (GET_ALL_TOPIC_CONFIG 21, GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201), leaving out
system topics, ``%RETRY%``/``%DLQ%`` topics and the broker's built-in groups unless asked. Import creates or updates
each entry on every master of the cluster (UPDATE_AND_CREATE_TOPIC 17 with its queue counts, perm and order;
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200 with the config as its body) and answers ``{name: None | error}``.
"""

from __future__ import annotations

import json
from typing import Any

from broker_core.client.admin_base import AdminBase
from broker_core.client.message import ClientError
from broker_core.codec.fastjson import items, loads_fastjson
from broker_core.codec.names import SYSTEM_TOPICS
from broker_core.protocol import RequestCode
from broker_core.protocol.validation import group_error, topic_error

INTERNAL_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_")
# the groups a RocketMQ broker creates for itself (SubscriptionGroupManager's defaults)
BUILT_IN_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                             "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS"})


def _exported_topic(name: str, system: bool) -> bool:
    return system or (name not in SYSTEM_TOPICS and not name.startswith(INTERNAL_PREFIXES)
                      and name not in ("SELF_TEST_TOPIC", "BenchmarkTest", "OFFSET_MOVED_EVENT"))


def _exported_group(name: str, system: bool) -> bool:
    return system or not (name in BUILT_IN_GROUPS or name.startswith("CID_RMQ_SYS_"))


class ExportAdminMixin(AdminBase):
    async def _tables(self, code: int, key: str, cluster: str | None) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for _, addr in sorted((await self._master_addrs(cluster)).items()):
            body = loads_fastjson((await self._call(addr, code)).body)
            for name, cfg in items(body.get(key) or {}):
                out.setdefault(str(name), dict(cfg))
        return dict(sorted(out.items()))

    def export_topics(self, cluster: str | None = None, system: bool = False) -> dict[str, Any]:
        """``{"topicConfigTable": {name: TopicConfig}}`` over every master of ``cluster``."""
        table = self._run(self._tables(RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable", cluster))
        return {"topicConfigTable": {n: c for n, c in table.items() if _exported_topic(n, system)}}

    def export_groups(self, cluster: str | None = None, system: bool = False) -> dict[str, Any]:
        """``{"subscriptionGroupTable": {name: SubscriptionGroupConfig}}`` over every master of ``cluster``."""
        table = self._run(self._tables(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable", cluster))
        return {"subscriptionGroupTable": {n: c for n, c in table.items() if _exported_group(n, system)}}

    def import_topics(self, doc: dict[str, Any], cluster: str | None = None) -> dict[str, str | None]:
        """Each ``topicConfigTable`` entry created or updated on every master; ``{topic: None | error}``."""
        async def go() -> dict[str, str | None]:
            addrs = list((await self._master_addrs(cluster)).values())
            out: dict[str, str | None] = {}
            for name, cfg in items(doc.get("topicConfigTable") or {}):
                name = str(name)
                err = topic_error(name) if isinstance(cfg, dict) else "not a TopicConfig object"
                if err:
                    out[name] = err
                    continue
                header = {"topic": name, "readQueueNums": int(cfg.get("readQueueNums", 8)),
                          "writeQueueNums": int(cfg.get("writeQueueNums", 8)), "perm": int(cfg.get("perm", 6)),
                          "topicFilterType": str(cfg.get("topicFilterType", "SINGLE_TAG")),
                          "topicSysFlag": int(cfg.get("topicSysFlag", 0)), "order": bool(cfg.get("order", False))}
                try:
                    for addr in addrs:
                        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
                    self.instance.routes.pop(name, None)
                    out[name] = None
                except (ClientError, ConnectionError, TimeoutError) as exc:
                    out[name] = str(exc) or type(exc).__name__
            return out
        return self._run(go())

    def import_groups(self, doc: dict[str, Any], cluster: str | None = None) -> dict[str, str | None]:
        """Each ``subscriptionGroupTable`` entry created or updated on every master; ``{group: None | error}``."""
        async def go() -> dict[str, str | None]:
            addrs = list((await self._master_addrs(cluster)).values())
            out: dict[str, str | None] = {}
            for name, cfg in items(doc.get("subscriptionGroupTable") or {}):
                name = str(name)
                err = group_error(name) if isinstance(cfg, dict) else "not a SubscriptionGroupConfig object"
                if err:
                    out[name] = err
                    continue
                body = json.dumps({**cfg, "groupName": name}, separators=(",", ":")).encode()
                try:
                    for addr in addrs:
                        await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
                    out[name] = None
                except (ClientError, ConnectionError, TimeoutError) as exc:
                    out[name] = str(exc) or type(exc).__name__
            return out
        return self._run(go())
