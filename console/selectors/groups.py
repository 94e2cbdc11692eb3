"""Consumer group reads: the group list (paged and searched in a cached index: :class:`GroupIndex`), committed
offsets and lag per queue, online clients, and the preview of an offset reset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker_core.client import ClientError, MessageQueue
from broker_core.protocol.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, group_error
from console import broker_client
from console.errors import bad_request
from console.models import AuditEvent
from console.selectors.broker_cache import BrokerCache
from console.selectors.messages import iso_ms
from console.selectors.topics import DLQ, PAGE_SIZE_MAX, RETRY, topic_index

# Audit actions whose target names a group (``<group>`` or ``<group>/<topic>``).
GROUP_AUDIT_ACTIONS = ("message.ack", "message.nack", "group.reset_offset", "dlq.resend")
BROKER, RETRY_TOPIC, DLQ_TOPIC, CONSOLE_AUDIT = "broker", "retry_topic", "dlq_topic", "console_audit"


def _summary(values: set[Any]) -> Any:
    if not values:
        return None
    return next(iter(values)) if len(values) == 1 else "mixed"


def consume_mode(clients: list[dict[str, Any]]) -> dict[str, Any]:
    """How ``group`` consumes, from its online clients' registrations: ``message_model`` (CLUSTERING or
    BROADCASTING), ``consume_type`` (PUSH; pull and receive/ack clients do not register), ``orderly`` ("orderly",
    "concurrently", or None when the clients do not say); each is "mixed" when clients differ and None when
    no client is online. ``label`` is the three in a line, for pages."""
    model = _summary({c["message_model"] for c in clients})
    kind = _summary({c["consume_type"] for c in clients})
    orderly = _summary({c["consume_orderly"] for c in clients if c["consume_orderly"] is not None})
    order = {True: "orderly", False: "concurrently"}.get(orderly, orderly) if orderly is not None else None
    label = " · ".join(str(v) for v in (model, kind, order) if v) if clients else "no client online"
    return {"message_model": model, "consume_type": kind, "orderly": order, "label": label}


def consumer_clients(group: str) -> list[dict[str, Any]]:
    """The online clients of ``group`` as they registered (``AdminClient.consumer_connections``)."""
    return [{"client_id": c["clientId"], "client_addr": c.get("clientAddr"), "consume_type": c.get("consumeType"),
             "message_model": c.get("messageModel"), "consume_from_where": c.get("consumeFromWhere"),
             "consume_orderly": c.get("consumeOrderly"), "subscriptions": c.get("subscriptions", {}),
             "brokers": c.get("brokers", []), "last_heartbeat_ago_ms": c.get("lastHeartbeatAgoMs")}
            for c in broker_client.admin().consumer_connections(group)]


def consume_stats(group: str, topic: str | None) -> dict[str, Any]:
    """Per-queue committed offset and lag of ``group`` (on ``topic``, or every topic), total lag, clients (ids in
    ``online``; registrations in ``clients``) and the group's ``consume_mode``."""
    data = broker_client.admin().consume_stats(group, topic or None)
    clients = consumer_clients(group)
    queues = [{"broker_name": r["brokerName"], "topic": r.get("topic", topic), "queue_id": r["queueId"],
               "min_offset": r.get("minOffset"), "max_offset": r.get("maxOffset"),
               "consumer_offset": r.get("consumerOffset"), "lag": r.get("lag", 0),
               "last_timestamp": iso_ms(r.get("lastTimestamp", 0))} for r in data["offsetTable"]]
    return {"group": group, "topic": topic or None, "total_lag": data["totalLag"], "online": data["online"],
            "clients": clients, "consume_mode": consume_mode(clients), "queues": queues}


@dataclass(frozen=True)
class GroupIndex:
    """Every known group with its ``sources`` (see :func:`list_groups`), ``names`` sorted and ``folded`` their
    lower case (same order); searches are remembered for the next pages of the same search."""

    sources: dict[str, list[str]]
    names: tuple[str, ...]
    folded: tuple[str, ...]
    searches: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def matching(self, search: str) -> tuple[str, ...]:
        if not search:
            return self.names
        needle = search.lower()
        found = self.searches.get(needle)
        if found is None:
            found = tuple(n for n, f in zip(self.names, self.folded, strict=True) if needle in f)
            if len(self.searches) >= 64:
                self.searches.clear()
            self.searches[needle] = found
        return found


def _build_index(admin: Any) -> GroupIndex:
    index = topic_index()
    found = _sources(admin, index.by_type[DLQ] + index.by_type[RETRY])  # the order of the sorted topic list
    names = tuple(sorted(found))
    return GroupIndex(found, names, tuple(n.lower() for n in names))


def _sources(admin: Any, topics: Sequence[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for group in admin.group_list(online=False):  # two requests per master, none per group
        if not group_error(group):
            found.setdefault(group, []).append(BROKER)
    for name in topics:
        for prefix, source in ((RETRY_GROUP_TOPIC_PREFIX, RETRY_TOPIC), (DLQ_GROUP_TOPIC_PREFIX, DLQ_TOPIC)):
            if name.startswith(prefix) and not group_error(name[len(prefix):]):
                found.setdefault(name[len(prefix):], []).append(source)
    targets = AuditEvent.objects.filter(action__in=GROUP_AUDIT_ACTIONS, ok=True).values_list("target", flat=True)
    for target in targets.distinct():
        group = target.split("/", 1)[0]
        if not group_error(group) and CONSOLE_AUDIT not in found.get(group, []):
            found.setdefault(group, []).append(CONSOLE_AUDIT)
    return found


# The masters have no cheap version of their group tables: rebuilt every CONSOLE_BROKER_CACHE_S seconds, in the
# background while the previous index is served (see console.selectors.broker_cache).
GROUPS: BrokerCache[GroupIndex] = BrokerCache("groups", _build_index)


def known_groups() -> dict[str, list[str]]:
    """``{group: [sources]}`` for every group the cluster or this console shows evidence of (see
    :func:`list_groups`), asked now (the lag sampler's view; the list pages use the cached :data:`GROUPS`)."""
    admin = broker_client.admin()
    return _sources(admin, admin.topic_list())


def _rows(index: GroupIndex, groups: Sequence[str]) -> list[dict[str, Any]]:
    """The list rows of ``groups``: one GET_CONSUME_STATS per group and master, all in flight at once, and the
    clients' registrations only of groups with a client online."""
    admin = broker_client.admin()
    stats_of = admin.consume_stats_many(list(groups)) if groups else {}
    rows = []
    for group in groups:
        sources = index.sources[group]
        row: dict[str, Any] = {"group": group, "sources": sources, "has_dlq": DLQ_TOPIC in sources}
        stats = stats_of[group]
        try:
            if isinstance(stats, ClientError):
                raise stats
            clients = consumer_clients(group) if stats["online"] else []
        except ClientError as exc:
            row.update(topics=None, total_lag=None, online=None, online_count=None, consume_mode=None,
                       error=str(exc))
        else:
            row.update(topics=sorted({r.get("topic", "") for r in stats["offsetTable"]}),
                       total_lag=stats["totalLag"], online=stats["online"], online_count=len(stats["online"]),
                       consume_mode=consume_mode(clients), error=None)
        rows.append(row)
    return rows


def list_groups(search: str = "") -> list[dict[str, Any]]:
    """Consumer groups, sorted by name, filtered by a case-insensitive substring, with lag and online clients.

    How the list is derived, each reason named in ``sources``:

    - ``broker``: a master knows the group (``AdminClient.group_list``: a subscription group config created on
      its first pull or heartbeat, committed offsets, or online clients),
    - ``retry_topic``: a ``%RETRY%<group>`` topic exists (a member of the group sent a message back), or
    - ``dlq_topic``: a ``%DLQ%<group>`` topic exists (the group has dead-lettered a message), or
    - ``console_audit``: this console successfully acked, nacked, reset offsets or resent dead letters for it
      (a group whose broker state is gone, e.g. after a broker was replaced).

    Per group, ``AdminClient.consume_stats`` (every master, every topic the group has committed offsets
    on) gives ``topics``, ``total_lag`` and the ``online`` client ids, and the clients' registrations its
    ``consume_mode`` (see :func:`consume_mode`); when a broker refuses those requests they are None and
    ``error`` says why. At many groups use :func:`groups_page`: this asks about every match.
    """
    index = GROUPS.get()
    return _rows(index, index.matching(search))


def groups_page(search: str = "", page: int = 1, page_size: int = PAGE_SIZE_MAX) -> dict[str, Any]:
    """One page of :func:`list_groups` (``page`` from 1, ``page_size`` 1..PAGE_SIZE_MAX): ``results``, ``count``
    (all matches), ``page``, ``page_size``, ``pages``. The names come from the cached :class:`GroupIndex`; lag,
    topics and online clients are asked for the page's groups only."""
    page_size = max(1, min(int(page_size), PAGE_SIZE_MAX))
    index = GROUPS.get()
    names = index.matching(search)
    pages = max(1, -(-len(names) // page_size))
    page = max(1, min(int(page), pages))
    return {"results": _rows(index, names[(page - 1) * page_size:page * page_size]), "count": len(names),
            "page": page, "page_size": page_size, "pages": pages}


@dataclass(frozen=True)
class ResetTarget:
    """Where to move a group's offsets: by time (``timestamp_ms``; 0 = earliest, -1 = latest) or to exact
    ``offsets`` ``{(broker, queue_id): offset}`` (only the named queues change)."""

    timestamp_ms: int | None = None
    offsets: dict[tuple[str, int], int] | None = None

    def describe(self) -> dict[str, Any]:
        """The target as JSON, for the audit log."""
        if self.offsets is not None:
            return {"offsets": [{"broker": b, "queue_id": q, "offset": o}
                                for (b, q), o in sorted(self.offsets.items())]}
        return {"timestamp_ms": self.timestamp_ms}


def _raw_target(mq: MessageQueue, row: dict[str, Any], target: ResetTarget) -> int:
    if target.offsets is not None:
        return target.offsets[(mq.broker_name, mq.queue_id)]
    if target.timestamp_ms == 0:
        return int(row["minOffset"])
    if target.timestamp_ms == -1:
        return int(row["maxOffset"])
    return broker_client.browser().search_offset(mq, int(target.timestamp_ms or 0))


def reset_preview(group: str, topic: str, target: ResetTarget) -> dict[str, Any]:
    """What resetting ``group`` on ``topic`` to ``target`` would do, changing nothing.

    Per queue: ``current_offset`` (committed, None if never), ``target_offset`` (clamped to the queue's
    [min, max] as the broker clamps it; by time, the first message stored at or after the time, found with
    the broker's SEARCH_OFFSET_BY_TIMESTAMP as the reset itself does) and ``replay``: how many messages would be
    delivered again (negative: skipped). A queue never committed counts from its min offset, as its lag does.
    Raises a 400 for exact offsets naming a queue the topic does not have.
    """
    stats = broker_client.admin().consume_stats(group, topic)["offsetTable"]
    by_queue = {(r["brokerName"], int(r["queueId"])): r for r in stats}
    if target.offsets is not None:
        unknown = sorted(set(target.offsets) - set(by_queue))
        if unknown:
            names = ", ".join(f"{b}/{q}" for b, q in unknown)
            raise bad_request("unknown_queue", f"topic {topic} has no queue {names}")
    queues = []
    for (broker, queue_id), row in sorted(by_queue.items()):
        if target.offsets is not None and (broker, queue_id) not in target.offsets:
            continue
        lo, hi = int(row["minOffset"]), int(row["maxOffset"])
        committed = int(row.get("consumerOffset", -1))
        wanted = _raw_target(MessageQueue(topic, broker, queue_id), row, target)
        goal = min(max(wanted, lo), hi)
        current = committed if committed >= 0 else lo
        queues.append({"broker_name": broker, "queue_id": queue_id, "min_offset": lo, "max_offset": hi,
                       "current_offset": committed if committed >= 0 else None, "target_offset": goal,
                       "replay": current - goal})
    return {"group": group, "topic": topic, "target": target.describe(), "queues": queues,
            "total_replay": sum(q["replay"] for q in queues)}
