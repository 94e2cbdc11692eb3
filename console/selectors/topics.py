"""Topic reads: the list with types, one topic's queue configuration, its route and per-queue stats."""

from __future__ import annotations

import threading
import time
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


AUTO_CREATED_TTL_S = 5.0  # how long the masters' answer on auto-created topics is reused
PAGE_SIZE_MAX = 1000
_auto_lock = threading.Lock()
_auto_cache: tuple[float, frozenset[str], frozenset[str]] | None = None  # (fetched, names then known, auto-created)


_auto_refreshing = threading.Event()


def _fetch_auto_created(names: list[str]) -> frozenset[str]:
    global _auto_cache
    now = time.monotonic()
    known = frozenset(broker_client.admin().topic_list())
    auto = frozenset(broker_client.admin().auto_created_topics())
    with _auto_lock:
        _auto_cache = (now, known | frozenset(names), auto)
    return auto


def _refresh_in_background() -> None:
    if _auto_refreshing.is_set():
        return
    _auto_refreshing.set()

    def run() -> None:
        try:
            _fetch_auto_created([])
        except (ClientError, OSError):
            pass  # the next view asks again
        finally:
            _auto_refreshing.clear()

    threading.Thread(target=run, name="topic-list-auto-created", daemon=True).start()


def _auto_created(names: list[str]) -> frozenset[str]:
    """Which of ``names`` some master created on a first send. Asking means GET_ALL_TOPIC_CONFIG from every
    master (megabytes at 50k topics), so a view asks only when ``names`` holds a topic the name server did not
    list when the answer was fetched (a new topic is never missed); an answer older than ``AUTO_CREATED_TTL_S``
    seconds is still used once and refreshed off the request, by one thread at a time."""
    with _auto_lock:
        cached = _auto_cache
    if cached is None or not cached[1].issuperset(names):
        return _fetch_auto_created(names)
    if time.monotonic() - cached[0] >= AUTO_CREATED_TTL_S:
        _refresh_in_background()
    return cached[2]


def _matching(search: str, kind: str) -> list[str]:
    """The name server's topics (one request), sorted, filtered by a case-insensitive substring and a type."""
    needle = search.lower()
    return [name for name in sorted(broker_client.admin().topic_list())
            if needle in name.lower() and (not kind or topic_type(name) == kind)]


def _rows(names: list[str]) -> list[dict[str, Any]]:
    auto = _auto_created(names) if names else frozenset()
    return [{"name": name, "type": topic_type(name), "auto_created": name in auto} for name in names]


def list_topics(search: str = "", kind: str = "") -> list[dict[str, Any]]:
    """Every topic the name server knows, sorted, filtered by a case-insensitive substring and a type;
    ``auto_created``: a broker created it on a first send (``autoCreateTopicEnable``), not an operator."""
    return _rows(_matching(search, kind))


def topics_page(search: str = "", kind: str = "", page: int = 1, page_size: int = PAGE_SIZE_MAX) -> dict[str, Any]:
    """One page of :func:`list_topics` (``page`` from 1, ``page_size`` 1..PAGE_SIZE_MAX): ``results``, ``count``
    (all matches), ``page``, ``page_size``, ``pages``. Only the page's rows are built; the masters are asked
    about auto-created topics at most every few seconds (:func:`_auto_created`)."""
    page_size = max(1, min(int(page_size), PAGE_SIZE_MAX))
    names = _matching(search, kind)
    pages = max(1, -(-len(names) // page_size))
    page = max(1, min(int(page), pages))
    return {"results": _rows(names[(page - 1) * page_size:page * page_size]), "count": len(names), "page": page,
            "page_size": page_size, "pages": pages}


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
