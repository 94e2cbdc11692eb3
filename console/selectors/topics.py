"""Topic reads: the list with types, one topic's queue configuration, its route and per-queue stats."""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode
from broker_core.protocol.validation import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)
from console import broker_client
from console.errors import not_found
from console.selectors.messages import check_topic_name, iso_ms

NORMAL, RETRY, DLQ, SYSTEM = "normal", "retry", "dlq", "system"
TOPIC_TYPES = (NORMAL, RETRY, DLQ, SYSTEM)


def topic_type(name: str) -> str:
    """``normal``, ``retry`` (``%RETRY%...``), ``dlq`` (``%DLQ%...``) or ``system``."""
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY
    if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return DLQ
    if name in SYSTEM_TOPICS or name.startswith("RMQ_SYS_"):
        return SYSTEM
    return NORMAL


def list_topics(search: str = "", kind: str = "") -> list[dict[str, Any]]:
    """Every topic the name server knows, sorted, filtered by a case-insensitive substring and a type;
    ``auto_created``: a broker created it on a first send (``autoCreateTopicEnable``), not an operator."""
    needle = search.lower()
    auto = broker_client.admin().auto_created_topics()
    rows: list[dict[str, Any]] = [{"name": name, "type": topic_type(name), "auto_created": name in auto}
            for name in sorted(broker_client.admin().topic_list())]
    return [r for r in rows if needle in r["name"].lower() and (not kind or r["type"] == kind)]


def topic_route(name: str) -> dict[str, Any]:
    """The name server's route: ``queueDatas`` per broker and ``brokerDatas`` with addresses."""
    return broker_client.admin().topic_route(check_topic_name(name))


def topic_detail(name: str) -> dict[str, Any]:
    """Name, type and per-broker queue counts and permission. Raises ClientError(TOPIC_NOT_EXIST)."""
    route = topic_route(name)
    brokers = [{"broker_name": q["brokerName"], "read_queue_nums": q["readQueueNums"],
                "write_queue_nums": q["writeQueueNums"], "perm": q["perm"]}
               for q in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"])]
    return {"name": name, "type": topic_type(name), "brokers": brokers}


def topic_stats(name: str) -> list[dict[str, Any]]:
    """Per queue: broker, queue id, min/max offset and last update time (ISO 8601 or None)."""
    return [{"broker_name": r["brokerName"], "queue_id": r["queueId"], "min_offset": r["minOffset"],
             "max_offset": r["maxOffset"], "last_update": iso_ms(r.get("lastUpdateTimestamp", 0))}
            for r in broker_client.admin().topic_stats(check_topic_name(name))]


def find_topic(name: str) -> dict[str, Any] | None:
    """The topic's detail, or None when the name server has no route for it."""
    try:
        return topic_detail(check_topic_name(name))
    except ClientError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        raise


def get_topic(name: str) -> dict[str, Any]:
    """The topic's detail, or a 400 (invalid name) / 404 (no such topic)."""
    found = find_topic(name)
    if found is None:
        raise not_found(f"topic {name} does not exist")
    return found
