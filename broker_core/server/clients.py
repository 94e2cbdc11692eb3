"""Who is connected: consumer groups and their clients, from heartbeats (upstream ``ConsumerManager``).

A client is dropped when its connection closes, when it unregisters, or after ``expire_ms`` without a
heartbeat. A change of a group's membership is announced to the group's other clients with a oneway
NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from broker_core.codec.hashing import tag_hash
from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.protocol.bodies import encode_reset_offset_body, encode_reset_offset_body_for_c
from broker_core.protocol.command import V3_0_7_SNAPSHOT
from broker_core.remoting.server import Connection

NOTIFY_CONSUMER_IDS_CHANGED = int(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)


CONSUME_TYPES = {"CONSUME_PASSIVELY": "PUSH", "CONSUME_ACTIVELY": "PULL"}


@dataclass
class ConsumerInfo:
    client_id: str
    conn: Connection
    consume_type: str = "PUSH"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression
    last_heartbeat: float = field(default_factory=time.monotonic)
    consume_orderly: bool | None = None  # as the client reports it (None: the client does not say)
    language: str = "JAVA"
    version: int = 0
    sub_data: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # topic -> (expr, type, subVersion)


def _subscriptions(consumer_data: dict[str, Any]) -> dict[str, tuple[str, str, int]]:
    """``subscriptionDataSet`` of a heartbeat's ConsumerData: topic -> (subString, expressionType, subVersion)."""
    out = {}
    for s in consumer_data.get("subscriptionDataSet") or []:
        out[str(s["topic"])] = (str(s.get("subString") or "*"), str(s.get("expressionType") or "TAG"),
                                int(s.get("subVersion") or 0))
    return out


def subscription_data(topic: str, expr: str, kind: str, version: int) -> dict[str, Any]:
    """RocketMQ's ``SubscriptionData`` as fastjson writes it: tags split on ``||``, their Java hashes."""
    tags = [] if kind != "TAG" or expr.strip() in ("", "*") else [t.strip() for t in expr.split("||") if t.strip()]
    return {"classFilterMode": False, "codeSet": [tag_hash(t) for t in tags], "expressionType": kind,
            "subString": expr, "subVersion": version, "tagsSet": tags, "topic": topic}


class ConsumerManager:
    def __init__(self, expire_s: float = 120.0) -> None:
        self.groups: dict[str, dict[str, ConsumerInfo]] = {}
        self.producers: dict[str, dict[str, Connection]] = {}
        self.expire_s = expire_s

    def heartbeat(self, client_id: str, conn: Connection, data: dict[str, Any], language: str = "JAVA",
                  version: int = 0) -> list[str]:
        """Register what a heartbeat (RocketMQ ``HeartbeatData``) says; returns the groups whose membership
        changed."""
        changed = []
        for p in data.get("producerDataSet") or []:
            self.producers.setdefault(str(p.get("groupName", "")), {})[client_id] = conn
        for c in data.get("consumerDataSet") or []:
            group = str(c["groupName"])
            members = self.groups.setdefault(group, {})
            info = members.get(client_id)
            sub_data = _subscriptions(c)
            subs = {topic: expr for topic, (expr, _t, _v) in sub_data.items()}
            orderly = c.get("consumeOrderly")
            raw_type = str(c.get("consumeType", "CONSUME_PASSIVELY"))
            if info is None or info.conn is not conn:
                members[client_id] = ConsumerInfo(client_id, conn, CONSUME_TYPES.get(raw_type, raw_type),
                                                  str(c.get("messageModel", "CLUSTERING")),
                                                  str(c.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET")), subs,
                                                  consume_orderly=None if orderly is None else bool(orderly),
                                                  language=language, version=version, sub_data=sub_data)
                if info is None:
                    changed.append(group)
            else:
                info.subscriptions = subs
                info.sub_data = sub_data
                info.last_heartbeat = time.monotonic()
                info.consume_orderly = None if orderly is None else bool(orderly)
        conn.attributes["client_id"] = client_id
        conn.attributes["language"] = language
        conn.attributes["version"] = version
        return changed

    def unregister(self, client_id: str, group: str | None = None) -> list[str]:
        changed = []
        for name, members in self.groups.items():
            if (group is None or name == group) and members.pop(client_id, None) is not None:
                changed.append(name)
        for producers in self.producers.values():
            producers.pop(client_id, None)
        return changed

    def connection_closed(self, conn: Connection) -> list[str]:
        changed = []
        for name, members in self.groups.items():
            for cid in [cid for cid, info in members.items() if info.conn is conn]:
                del members[cid]
                changed.append(name)
        for producers in self.producers.values():
            for cid in [cid for cid, c in producers.items() if c is conn]:
                del producers[cid]
        return changed

    def scan_expired(self) -> list[str]:
        now = time.monotonic()
        changed = []
        for name, members in self.groups.items():
            for cid in [cid for cid, info in members.items() if now - info.last_heartbeat > self.expire_s]:
                del members[cid]
                changed.append(name)
        return changed

    def find_subscription(self, group: str, topic: str) -> tuple[str, str, int] | None:
        """The subscription a live member of ``group`` registered for ``topic``: (expression, type,
        subVersion), the newest version when members differ; None when no member subscribes to it."""
        found = [info.sub_data[topic] for info in self.groups.get(group, {}).values() if topic in info.sub_data]
        return max(found, key=lambda s: s[2]) if found else None

    def client_ids(self, group: str) -> list[str]:
        return sorted(self.groups.get(group, {}))

    def connections(self, group: str) -> list[dict[str, Any]]:
        """Each online client of ``group`` as it registered: consume type, message model, where it starts,
        whether it consumes orderly, its subscriptions, address and seconds since its last heartbeat."""
        now = time.monotonic()
        return [{"clientId": cid, "clientAddr": info.conn.remote, "consumeType": info.consume_type,
                 "messageModel": info.message_model, "consumeFromWhere": info.consume_from_where,
                 "consumeOrderly": info.consume_orderly, "subscriptions": dict(info.subscriptions),
                 "lastHeartbeatAgoMs": int((now - info.last_heartbeat) * 1000)}
                for cid, info in sorted(self.groups.get(group, {}).items())]

    def consumer_connection(self, group: str) -> dict[str, Any] | None:
        """RocketMQ's ``ConsumerConnection`` of ``group`` (None when no member is online): one ``Connection`` per
        client (``clientAddr, clientId, language, version``, plus what this broker also knows of each member:
        ``consumeType`` PUSH/PULL, ``consumeOrderly``, ``subscriptions``, ``lastHeartbeatAgoMs``; Java and Go
        readers ignore keys they do not know), the group's consume type, model and start point as the newest
        heartbeat says, and ``subscriptionTable`` (topic -> SubscriptionData)."""
        members = self.groups.get(group, {})
        if not members:
            return None
        now = time.monotonic()
        newest = max(members.values(), key=lambda i: i.last_heartbeat)
        conns = [{"clientAddr": info.conn.remote, "clientId": cid, "language": info.language,
                  "version": info.version, "consumeType": info.consume_type, "messageModel": info.message_model,
                  "consumeFromWhere": info.consume_from_where, "consumeOrderly": info.consume_orderly,
                  "subscriptions": dict(info.subscriptions),
                  "lastHeartbeatAgoMs": int((now - info.last_heartbeat) * 1000)}
                 for cid, info in sorted(members.items())]
        table: dict[str, dict[str, Any]] = {}
        for info in sorted(members.values(), key=lambda i: i.last_heartbeat):
            for topic, (expr, kind, version) in info.sub_data.items():
                table[topic] = subscription_data(topic, expr, kind, version)
        raw_type = {v: k for k, v in CONSUME_TYPES.items()}.get(newest.consume_type, newest.consume_type)
        return {"connectionSet": conns, "consumeFromWhere": newest.consume_from_where, "consumeType": raw_type,
                "messageModel": newest.message_model, "subscriptionTable": dict(sorted(table.items()))}

    def producer_connection(self, group: str) -> dict[str, Any] | None:
        """RocketMQ's ``ProducerConnection`` of ``group``; None when no producer of it is connected."""
        members = self.producers.get(group, {})
        if not members:
            return None
        return {"connectionSet": [{"clientAddr": conn.remote, "clientId": cid,
                                   "language": conn.attributes.get("language", "JAVA"),
                                   "version": conn.attributes.get("version", 0)}
                                  for cid, conn in sorted(members.items())]}

    def notify_changed(self, group: str) -> None:
        cmd = RemotingCommand.request(NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True)
        for info in list(self.groups.get(group, {}).values()):
            info.conn.send(cmd)

    def notify_reset(self, group: str, topic: str, broker_name: str, offsets: dict[int, int], timestamp: int,
                     force: bool = True, for_c: bool = False) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (220) to every member of ``group`` whose version is at least 3.0.7:
        header ``topic, group, timestamp, isForce``, body ``ResetOffsetBody`` in fastjson's object-key form, or
        the list form ``ResetOffsetBodyForC`` when the reset was asked by a CPP client (``for_c``), as Java."""
        body = (encode_reset_offset_body_for_c if for_c else encode_reset_offset_body)(topic, broker_name, offsets)
        cmd = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, {
            "topic": topic, "group": group, "timestamp": timestamp, "isForce": force}, body, oneway=True)
        for info in list(self.groups.get(group, {}).values()):
            if info.version >= V3_0_7_SNAPSHOT:
                info.conn.send(cmd)
