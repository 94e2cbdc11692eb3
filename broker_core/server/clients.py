"""Who is connected: consumer groups and their clients, from heartbeats (upstream ``ConsumerManager``).

A client is dropped when its connection closes, when it unregisters, or after ``expire_ms`` without a
heartbeat. A change of a group's membership is announced to the group's other clients with a oneway
NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.remoting.server import Connection

NOTIFY_CONSUMER_IDS_CHANGED = 40
RESET_CONSUMER_CLIENT_OFFSET = 220


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


class ConsumerManager:
    def __init__(self, expire_s: float = 120.0) -> None:
        self.groups: dict[str, dict[str, ConsumerInfo]] = {}
        self.producers: dict[str, dict[str, Connection]] = {}
        self.expire_s = expire_s

    def heartbeat(self, client_id: str, conn: Connection, data: dict[str, Any]) -> list[str]:
        """Register what a heartbeat says; returns the groups whose membership changed."""
        changed = []
        for p in data.get("producerDataSet", []):
            self.producers.setdefault(str(p.get("groupName", "")), {})[client_id] = conn
        for c in data.get("consumerDataSet", []):
            group = str(c["groupName"])
            members = self.groups.setdefault(group, {})
            info = members.get(client_id)
            subs = {str(s["topic"]): str(s.get("subString", "*")) for s in c.get("subscriptionDataSet", [])}
            orderly = c.get("consumeOrderly")
            if info is None or info.conn is not conn:
                members[client_id] = ConsumerInfo(client_id, conn, str(c.get("consumeType", "PUSH")),
                                                  str(c.get("messageModel", "CLUSTERING")),
                                                  str(c.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET")), subs,
                                                  consume_orderly=None if orderly is None else bool(orderly))
                if info is None:
                    changed.append(group)
            else:
                info.subscriptions = subs
                info.last_heartbeat = time.monotonic()
                info.consume_orderly = None if orderly is None else bool(orderly)
        conn.attributes["client_id"] = client_id
        return changed

    def unregister(self, client_id: str, group: str | None = None) -> list[str]:
        changed = []
        for name, members in self.groups.items():
            if (group is None or name == group) and members.pop(client_id, None) is not None:
                changed.append(name)
        for members in self.producers.values():
            members.pop(client_id, None)
        return changed

    def connection_closed(self, conn: Connection) -> list[str]:
        changed = []
        for name, members in self.groups.items():
            for cid in [cid for cid, info in members.items() if info.conn is conn]:
                del members[cid]
                changed.append(name)
        for members in self.producers.values():
            for cid in [cid for cid, c in members.items() if c is conn]:
                del members[cid]
        return changed

    def scan_expired(self) -> list[str]:
        now = time.monotonic()
        changed = []
        for name, members in self.groups.items():
            for cid in [cid for cid, info in members.items() if now - info.last_heartbeat > self.expire_s]:
                del members[cid]
                changed.append(name)
        return changed

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

    def notify_changed(self, group: str) -> None:
        cmd = RemotingCommand.request(NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True)
        for info in list(self.groups.get(group, {}).values()):
            info.conn.send(cmd)

    def notify_reset(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        import json

        cmd = RemotingCommand.request(RESET_CONSUMER_CLIENT_OFFSET, {"consumerGroup": group, "topic": topic},
                                      json.dumps({str(q): o for q, o in offsets.items()}).encode(), oneway=True)
        for info in list(self.groups.get(group, {}).values()):
            info.conn.send(cmd)


_ = RequestCode  # codes used by clients for these notifications are defined above
