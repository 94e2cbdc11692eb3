"""Reads shaped for the consumer group pages: the group list, a group's queues per topic, and the offset-reset
form's targets. Everything goes through the selectors the API uses (``console.selectors.groups``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from console.selectors.groups import ResetTarget, consume_stats, groups_page

# ResetTarget.timestamp_ms sentinels (as ResetOffsetSerializer builds them): earliest and latest.
EARLIEST_MS, LATEST_MS = 0, -1
RESET_MODES = (("earliest", "Earliest retained message"), ("latest", "Latest (skip everything not yet consumed)"),
               ("time", "A point in time"), ("exact", "Exact offsets per queue"))


PAGE_SIZE = 100  # groups per list page


def group_list_context(search: str = "", page: int = 1) -> dict[str, Any]:
    """The list page's context: one page of ``GET /api/v1/consumer-groups/``'s rows (lag, online clients,
    sources, DLQ) as ``groups``, with ``count``, ``page`` and ``pages``."""
    found = groups_page(search, page, PAGE_SIZE)
    return {"groups": found["results"], "count": found["count"], "page": found["page"], "pages": found["pages"],
            "search": search}


def group_queues(group: str, topic: str | None) -> dict[str, Any]:
    """``consume_stats`` of the group (one topic, or every topic it committed offsets on) with its queues
    grouped per topic: ``{"group", "topic", "total_lag", "online", "topics": [{"topic", "lag", "queues"}]}``."""
    stats = consume_stats(group, topic)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for q in stats["queues"]:
        by_topic.setdefault(q["topic"] or "", []).append(q)
    topics = [{"topic": name, "lag": sum(q["lag"] or 0 for q in queues),
               "queues": sorted(queues, key=lambda q: (q["broker_name"], q["queue_id"]))}
              for name, queues in sorted(by_topic.items())]
    return {**stats, "topics": topics}


def reset_target(mode: str, when: dt.datetime | None,
                 offsets: dict[tuple[str, int], int] | None = None) -> ResetTarget:
    """The :class:`ResetTarget` of the reset form: ``earliest``, ``latest``, ``time`` (an aware datetime) or
    ``exact`` (``offsets`` per (broker, queue id))."""
    if mode == "exact":
        assert offsets
        return ResetTarget(offsets=dict(offsets))
    if mode == "earliest":
        return ResetTarget(timestamp_ms=EARLIEST_MS)
    if mode == "latest":
        return ResetTarget(timestamp_ms=LATEST_MS)
    assert when is not None
    return ResetTarget(timestamp_ms=max(0, int(when.timestamp() * 1000)))


def reset_queue_rows(group: str, topic: str, offsets: dict[tuple[str, int], int] | None = None
                     ) -> list[dict[str, Any]]:
    """The reset form's per-queue rows of ``topic``: min/max, the group's committed offset, and the exact offset
    typed for it so far (``entered``), with ``input`` the form field's name."""
    rows = consume_stats(group, topic)["queues"]
    entered = offsets or {}
    return [{**q, "input": f"q:{q['broker_name']}:{q['queue_id']}",
             "entered": entered.get((q["broker_name"], q["queue_id"]))}
            for q in sorted(rows, key=lambda q: (q["broker_name"], q["queue_id"]))]
