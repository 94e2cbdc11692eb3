"""Reads for the cluster / routes page: every topic's route (per broker: read/write queues and permission); the
broker groups come from :mod:`console.selectors.replication`."""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode
from console import broker_client
from console.selectors.topics import list_topics

PERM_NAMES = {6: "read-write", 4: "read only", 2: "write only", 0: "none"}


def topic_routes(search: str = "", kind: str = "") -> list[dict[str, Any]]:
    """Per topic (filtered like the topic list): type and one row per broker with read/write queues and
    permission. A topic deleted between the list and its route is left out."""
    admin = broker_client.admin()
    rows = []
    for t in list_topics(search, kind):
        try:
            route = admin.topic_route(t["name"])
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                continue
            raise
        brokers = [{"broker_name": q["brokerName"], "read_queue_nums": q["readQueueNums"],
                    "write_queue_nums": q["writeQueueNums"], "perm": q["perm"],
                    "perm_name": PERM_NAMES.get(q["perm"], str(q["perm"]))}
                   for q in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"])]
        rows.append({**t, "brokers": brokers})
    return rows
