"""Message reads: lookups by offset id, unique id and key, browsing a topic by time range with a cursor, and
the JSON shape every endpoint uses."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from broker_core.client import MessageExt, MessageQueue, PullStatus
from broker_core.codec.errors import CodecError
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.protocol.sql92 import Selector, compile_sql92
from broker_core.protocol.validation import topic_error
from console import broker_client
from console.errors import bad_request, not_found

# 4.x unique and offset ids are 32 hex characters; RocketMQ 5 clients' ids are version "01" + 32
MESSAGE_ID = re.compile(r"^(?:01)?[0-9A-Fa-f]{32}$")
OFFSET_MSG_ID = re.compile(r"^[0-9A-Fa-f]{32}$")  # broker address + CommitLog offset
# Properties the JSON already shows as fields.
SHOWN_PROPERTIES = {"TAGS", "KEYS", "UNIQ_KEY"}


def iso_ms(ms: int) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC, None for 0 (never)."""
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def body_json(body: bytes) -> dict[str, str]:
    """``{"text": ...}`` for UTF-8 bodies, else ``{"base64": ...}``."""
    try:
        return {"text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}


def message_json(msg: MessageExt, with_body: bool) -> dict[str, Any]:
    """The API shape of one message; ``with_body=False`` (viewers) leaves the body out."""
    out: dict[str, Any] = {
        "msg_id": msg.msg_id, "offset_msg_id": msg.offset_msg_id, "topic": msg.topic,
        "broker_name": msg.broker_name, "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
        "tags": msg.tags, "keys": msg.keys,
        "properties": {k: v for k, v in msg.properties.items() if k not in SHOWN_PROPERTIES},
        "born_timestamp": iso_ms(msg.born_timestamp), "store_timestamp": iso_ms(msg.store_timestamp),
        "born_host": msg.born_host, "store_host": msg.store_host, "reconsume_times": msg.reconsume_times,
        "body_size": len(msg.body),
    }
    if with_body:
        out["body"] = body_json(msg.body)
    return out


def check_message_id(msg_id: str) -> None:
    """Raise a 400 unless ``msg_id`` is 32 hex characters (4.x unique and offset ids) or 34 starting ``01``
    (RocketMQ 5 ids)."""
    if not MESSAGE_ID.match(msg_id):
        raise bad_request("invalid_message_id",
                          f"a message id is 32 hex characters (34 for a RocketMQ 5 id), got {msg_id!r}")


def _broker_addrs() -> set[str]:
    info = broker_client.admin().cluster_info()
    return {addr for data in info.get("brokerAddrTable", {}).values() for addr in data.get("brokerAddrs", {}).values()}


def message_by_offset_id(offset_msg_id: str) -> MessageExt:
    """The message an offset id points at. Only asks brokers the name server knows (an id is not a way to
    make the console connect anywhere); 404 when no known broker has it."""
    check_message_id(offset_msg_id)
    try:
        ip, port, _ = decode_offset_msg_id(offset_msg_id)
    except CodecError as exc:
        raise bad_request("invalid_message_id", str(exc)) from None
    if f"{ip}:{port}" not in _broker_addrs():
        raise not_found(f"no known broker at {ip}:{port}; is {offset_msg_id} an offset message id? "
                        "For a unique message id pass ?topic=")
    return broker_client.admin().view_message(offset_msg_id.upper())


def message_by_unique_id(topic: str, msg_id: str) -> MessageExt:
    """The message of ``topic`` with unique id ``msg_id`` (through the broker's index); 404 when none."""
    check_message_id(msg_id)
    found, _ = broker_client.admin().query_message(topic, msg_id.upper(), max_num=1)
    if not found:
        raise not_found(f"no message {msg_id} in topic {topic}")
    return found[0]


def check_topic_name(name: str) -> str:
    """``name``, or a 400 ``invalid_topic`` saying what is wrong with it."""
    err = topic_error(name)
    if err:
        raise bad_request("invalid_topic", err)
    return name


def find_message(msg_id: str, topic: str | None) -> MessageExt:
    """A unique message id with its ``topic``, or an offset message id without one (400/404 as above)."""
    if topic:
        return message_by_unique_id(check_topic_name(topic), msg_id)
    return message_by_offset_id(msg_id)


def messages_by_key(topic: str, key: str, limit: int, begin_ms: int = 0,
                    end_ms: int = (1 << 63) - 1) -> tuple[list[MessageExt], bool]:
    """Messages of ``topic`` with ``key``, newest first, and whether more than ``limit`` exist."""
    return broker_client.admin().query_message(topic, key, max_num=limit, begin_ms=begin_ms, end_ms=end_ms)


def dead_letters(group: str, limit: int) -> tuple[list[MessageExt], bool]:
    """Dead letters of ``group``, oldest first, and whether the list was cut at ``limit``."""
    found = broker_client.admin().dead_letters(group, max_num=limit + 1)
    return found[:limit], len(found) > limit


# ---------------------------------------------------------------------------------------------- time-range browse
MAX_TIMESTAMP_MS = (1 << 63) - 1
BROWSE_BATCH = 32  # messages per pull


def encode_cursor(topic: str, positions: dict[tuple[str, int], int]) -> str:
    """The opaque cursor: URL-safe base64 of JSON ``{"v": 1, "topic": T, "q": [[broker, queue, offset], ...]}``."""
    data = {"v": 1, "topic": topic, "q": [[b, q, o] for (b, q), o in sorted(positions.items())]}
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode("ascii")


def decode_cursor(topic: str, cursor: str) -> dict[tuple[str, int], int]:
    """``{(broker, queue): next offset}`` from a cursor :func:`encode_cursor` made for ``topic``, or a 400."""
    def bad(why: str) -> Exception:
        return bad_request("invalid_cursor", f"cursor is not one this API returned for topic {topic}: {why}")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii") + b"=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeError):
        raise bad("not base64 JSON") from None
    if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(data.get("q"), list):
        raise bad("unknown format")
    if data.get("topic") != topic:
        raise bad("it belongs to another topic")
    out: dict[tuple[str, int], int] = {}
    for item in data["q"]:
        if (not isinstance(item, list) or len(item) != 3 or not isinstance(item[0], str)
                or not all(type(x) is int and x >= 0 for x in item[1:])):
            raise bad("malformed queue position")
        out[(item[0], item[1])] = item[2]
    return out


@dataclass
class _QueueReader:
    """Reads one queue forward from ``offset``, keeping messages stored in [begin_ms, end_ms]; stops at the
    first message stored after ``end_ms`` or at the end of the queue."""

    mq: MessageQueue
    offset: int  # the next offset to pull
    begin_ms: int
    end_ms: int
    selector: Selector | None = None  # a SQL92 filter over properties (the console filters, any broker)
    buffer: list[MessageExt] = field(default_factory=list)
    done: bool = False

    @property
    def position(self) -> int:
        """The offset of the first message not yet returned (what the cursor keeps)."""
        return self.buffer[0].queue_offset if self.buffer else self.offset

    def peek(self) -> MessageExt | None:
        while not self.buffer and not self.done:
            self._fetch()
        return self.buffer[0] if self.buffer else None

    def pop(self) -> MessageExt:
        return self.buffer.pop(0)

    def _fetch(self) -> None:
        res = broker_client.browser().pull(self.mq, self.offset, BROWSE_BATCH)
        if res.status == PullStatus.FOUND:
            for m in res.messages:
                if m.store_timestamp > self.end_ms:
                    self.done = True
                    self.offset = m.queue_offset
                    return
                if m.store_timestamp >= self.begin_ms and (
                        self.selector is None or self.selector.matches(m.properties)):
                    self.buffer.append(m)
            self.offset = max(res.next_begin_offset, self.offset + 1)
        elif res.status == PullStatus.NO_NEW_MSG or res.next_begin_offset <= self.offset:
            self.done = True  # the end of the queue (or a position the broker cannot move past)
        else:  # NO_MATCHED_MSG / OFFSET_ILLEGAL (e.g. below the min offset after retention): jump ahead
            self.offset = res.next_begin_offset


def browse(topic: str, begin_ms: int, end_ms: int, cursor: str, limit: int, sql: str = ""
           ) -> tuple[list[MessageExt], str | None]:
    """Messages of ``topic`` stored in [``begin_ms``, ``end_ms``] over every readable queue, oldest first
    (merged by store time; ties by broker, queue, offset), at most ``limit``, and the cursor of the next page
    (None when nothing is left, so ``next`` is set exactly when ``limit`` cut the page).

    Each queue starts at the cursor's position for it or, on the first page, at the broker's answer to
    SEARCH_OFFSET_BY_TIMESTAMP for ``begin_ms`` (through the console's browsing PullConsumer). Pages taken
    with the same ``end_ms`` return every message in the range exactly once.

    ``sql``: keep only messages a SQL92 selector (``MessageSelector.bySql``, RocketMQ's semantics) matches; the
    console evaluates it, so it works whether or not the broker has ``enablePropertyFilter``. A bad expression
    raises :class:`~broker_core.protocol.sql92.Sql92Error` before anything is read.
    """
    selector = compile_sql92(sql) if sql.strip() else None
    consumer = broker_client.browser()
    positions = decode_cursor(topic, cursor) if cursor else {}
    readers = []
    for mq in consumer.fetch_queues(topic):
        start = positions.get((mq.broker_name, mq.queue_id))
        if start is None:
            start = consumer.search_offset(mq, begin_ms) if begin_ms > 0 else consumer.min_offset(mq)
        readers.append(_QueueReader(mq, start, begin_ms, end_ms, selector))
    found: list[MessageExt] = []
    while len(found) < limit:
        heads = [(m.store_timestamp, r.mq.broker_name, r.mq.queue_id, m.queue_offset, i)
                 for i, r in enumerate(readers) if (m := r.peek()) is not None]
        if not heads:
            break
        found.append(readers[min(heads)[-1]].pop())
    more = any(r.peek() is not None for r in readers)
    if not more:
        return found, None
    return found, encode_cursor(topic, {(r.mq.broker_name, r.mq.queue_id): r.position for r in readers})
