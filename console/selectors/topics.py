"""Topic reads: the list with types (paged and searched in a cached index: :class:`TopicIndex`), one topic's queue
configuration, its route and per-queue stats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
from console.selectors.broker_cache import BrokerCache
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


PAGE_SIZE_MAX = 1000
_SEARCHES_KEPT = 64  # recent (search, type) answers an index keeps, for paging through one search


@dataclass(frozen=True)
class TopicIndex:
    """The name server's topic list as the pages need it, built once per change (see :data:`TOPICS`):
    ``names`` sorted, ``folded`` their lower case (same order), ``types`` their :func:`topic_type`, ``by_type``
    the names of each type (sorted), ``auto_created`` the topics some master created on a first send."""

    names: tuple[str, ...]
    folded: tuple[str, ...]
    types: tuple[str, ...]
    by_type: dict[str, tuple[str, ...]]
    auto_created: frozenset[str]
    searches: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, names: list[str], auto_created: frozenset[str]) -> TopicIndex:
        ordered = tuple(sorted(set(names)))
        types = tuple(topic_type(n) for n in ordered)
        by_type: dict[str, list[str]] = {t: [] for t in TOPIC_TYPES}
        for name, kind in zip(ordered, types, strict=True):
            by_type[kind].append(name)
        return cls(ordered, tuple(n.lower() for n in ordered), types, {k: tuple(v) for k, v in by_type.items()},
                   auto_created)

    def matching(self, search: str, kind: str) -> tuple[str, ...]:
        """Names (sorted) holding ``search`` (case-insensitive) of type ``kind`` ("" = any); no copy without a
        search, one pass over the names with one, remembered for the next pages of the same search."""
        if not search:
            return self.by_type[kind] if kind else self.names
        key = (search.lower(), kind)
        found = self.searches.get(key)
        if found is None:
            needle = key[0]
            found = tuple(name for name, folded, t in zip(self.names, self.folded, self.types, strict=True)
                          if needle in folded and (not kind or t == kind))
            if len(self.searches) >= _SEARCHES_KEPT:
                self.searches.clear()
            self.searches[key] = found
        return found


def _build_index(admin: Any) -> TopicIndex:
    # auto_created_topics is GET_ALL_TOPIC_CONFIG from every master (megabytes at 50k topics): asked only here,
    # that is when a broker's topics changed (topic_config_versions) or this console changed one
    return TopicIndex.of(admin.topic_list(), frozenset(admin.auto_created_topics()))


# Rebuilt when the name server's topic-config DataVersion of a broker (or the set of brokers) changed: a few
# hundred bytes asked at most every CONSOLE_BROKER_CACHE_S seconds, instead of the topic list and every master's
# topic configs per view.
TOPICS: BrokerCache[TopicIndex] = BrokerCache("topics", _build_index, lambda admin: admin.topic_config_versions())


def topic_index() -> TopicIndex:
    """The cached :class:`TopicIndex` of the configured cluster (see :mod:`console.selectors.broker_cache`)."""
    return TOPICS.get()


def _rows(index: TopicIndex, names: Sequence[str]) -> list[dict[str, Any]]:
    auto = index.auto_created
    return [{"name": name, "type": topic_type(name), "auto_created": name in auto} for name in names]


def list_topics(search: str = "", kind: str = "") -> list[dict[str, Any]]:
    """Every topic the name server knows, sorted, filtered by a case-insensitive substring and a type;
    ``auto_created``: a broker created it on a first send (``autoCreateTopicEnable``), not an operator."""
    index = topic_index()
    return _rows(index, index.matching(search, kind))


def topic_type_counts() -> dict[str, int]:
    """How many topics of each type the name server knows."""
    return {kind: len(names) for kind, names in topic_index().by_type.items()}


def topics_page(search: str = "", kind: str = "", page: int = 1, page_size: int = PAGE_SIZE_MAX) -> dict[str, Any]:
    """One page of :func:`list_topics` (``page`` from 1, ``page_size`` 1..PAGE_SIZE_MAX): ``results``, ``count``
    (all matches), ``page``, ``page_size``, ``pages``. Only the page's rows are built, from the cached index."""
    page_size = max(1, min(int(page_size), PAGE_SIZE_MAX))
    index = topic_index()
    names = index.matching(search, kind)
    pages = max(1, -(-len(names) // page_size))
    page = max(1, min(int(page), pages))
    return {"results": _rows(index, names[(page - 1) * page_size:page * page_size]), "count": len(names),
            "page": page, "page_size": page_size, "pages": pages}


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
