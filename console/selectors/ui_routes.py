"""Reads for the cluster / routes page: every topic's route (per broker: read/write queues and permission); the
broker groups come from :mod:`console.selectors.replication`."""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode
from console import broker_client
from console.selectors.topics import list_topics, topics_page

PERM_NAMES = {6: "read-write", 4: "read only", 2: "write only", 0: "none"}


ROUTES_PAGE_SIZE = 100  # topics whose routes one cluster page shows (one GET_ROUTEINFO_BY_TOPIC each)


def topic_routes_page(search: str = "", kind: str = "", page: int = 1) -> dict[str, Any]:
    """One page of :func:`topic_routes` (``ROUTES_PAGE_SIZE`` topics, from the cached topic index): ``routes``,
    ``count`` (every match), ``page`` and ``pages``; the name server is asked for the page's routes only."""
    found = topics_page(search, kind, page, ROUTES_PAGE_SIZE)
    return {"routes": _routes(found["results"]), "count": found["count"], "page": found["page"],
            "pages": found["pages"]}


def topic_routes(search: str = "", kind: str = "") -> list[dict[str, Any]]:
    """Per topic (filtered like the topic list): type and one row per broker with read/write queues and
    permission. A topic deleted between the list and its route is left out. One request per topic: at many
    topics use :func:`topic_routes_page`."""
    return _routes(list_topics(search, kind))


def _routes(topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    admin = broker_client.admin()
    rows = []
    for t in topics:
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
