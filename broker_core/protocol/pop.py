"""RocketMQ 5 POP's text formats, exactly as ``ExtraInfoUtil`` and ``BatchAck`` write them (sans-I/O).

The receipt handle of a remoting POP consumer is the ``extraInfo`` string (the message property ``POP_CK``),
eight fields joined by ``MessageConst.KEY_SEPARATOR`` (one space)::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId msgQueueOffset

``retry`` is ``0`` for a normal topic, ``1`` for a ``%RETRY%`` topic (v1), ``2`` for a v2 POP retry topic.
The seven-field form (without ``msgQueueOffset``) is the checkpoint's; an ack then names the offset in its header.

A POP_MESSAGE response header describes its messages per ``retry@queueId`` key, entries joined by ``;``:

- ``startOffsetInfo``: ``retry queueId startOffset`` (the checkpoint's first offset of that queue),
- ``msgOffsetInfo``: ``retry queueId o1,o2,...`` (the offsets of that queue's messages, in body order),
- ``orderCountInfo`` (order POP): ``retry queueId count`` (how often those messages were popped before).

BATCH_ACK_MESSAGE's body is fastjson ``BatchAckMessageRequestBody`` ``{"acks": [{"c": group, "t": topic,
"r": retry, "so": startOffset, "q": queueId, "rq": reviveQid, "pt": popTime, "it": invisibleTime, "b":
bitSet}], "brokerName": ...}``; ``b`` is ``java.util.BitSet.toByteArray()`` (little-endian: bit ``i`` acks
offset ``so + i``) written as fastjson writes a ``byte[]``: a base64 string (an array of numbers is read too).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass

from broker_core.codec.fastjson import items, loads_fastjson
from broker_core.errors import BadRequest

KEY_SEPARATOR = " "
NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2 = "0", "1", "2"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
POP_ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: the reviveQid of an order POP
POP_RETRY_SEPARATOR_V2 = "+"  # KeyBuilder.POP_RETRY_SEPARATOR_V2 ("%RETRY%group+topic")


def retry_mark(topic: str) -> str:
    """``ExtraInfoUtil.getRetry(topic)``."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC_V2 if POP_RETRY_SEPARATOR_V2 in topic else RETRY_TOPIC
    return NORMAL_TOPIC


@dataclass(frozen=True)
class ExtraInfo:
    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None = None  # the 8th field (absent in the checkpoint's seven-field form)

    def encode(self) -> str:
        parts = [self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid, self.retry,
                 self.broker_name, self.queue_id]
        if self.queue_offset is not None:
            parts.append(self.queue_offset)
        return KEY_SEPARATOR.join(str(p) for p in parts)

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE


def parse_extra_info(text: str) -> ExtraInfo:
    """``extraInfo`` (seven or eight fields); BadRequest naming the handle when it is not one."""
    parts = str(text).split(KEY_SEPARATOR)
    try:
        if len(parts) not in (7, 8):
            raise ValueError(f"{len(parts)} fields")
        return ExtraInfo(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5],
                         int(parts[6]), int(parts[7]) if len(parts) == 8 else None)
    except ValueError:
        raise BadRequest(f"malformed receipt handle (extraInfo) {text!r}") from None


def offset_info(entries: Iterable[tuple[str, int, str]]) -> str:
    """``retry queueId value`` entries joined by ``;`` (start offsets, offset lists, order counts)."""
    return ";".join(f"{retry}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{value}" for retry, queue_id, value in entries)


def parse_offset_info(text: str | None) -> dict[str, str]:
    """``{"retry@queueId": value}`` of a start-offset, msg-offset or order-count info ({} when empty)."""
    out: dict[str, str] = {}
    if not text:
        return out
    for one in str(text).split(";"):
        parts = one.split(KEY_SEPARATOR)
        if len(parts) != 3:
            raise ValueError(f"bad POP offset info entry {one!r}")
        key = f"{parts[0]}@{parts[1]}"
        if key in out:
            raise ValueError(f"duplicate POP offset info key {key!r}")
        out[key] = parts[2]
    return out


@dataclass(frozen=True)
class BatchAck:
    group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    offsets: tuple[int, ...]  # start_offset + each set bit

    def real_topic(self) -> str:
        """``ExtraInfoUtil.getRealTopic(topic, group, retry)`` for the retry marks this broker writes (0)."""
        if self.retry == NORMAL_TOPIC:
            return self.topic
        if self.retry == RETRY_TOPIC:
            return f"{RETRY_GROUP_TOPIC_PREFIX}{self.group}_{self.topic}"
        if self.retry == RETRY_TOPIC_V2:
            return f"{RETRY_GROUP_TOPIC_PREFIX}{self.group}{POP_RETRY_SEPARATOR_V2}{self.topic}"
        raise BadRequest(f"batch ack retry mark {self.retry!r} is not 0, 1 or 2")


def bitset_offsets(raw: object) -> list[int]:
    """The set bit indexes of a fastjson-written ``BitSet`` (base64 text or a number array)."""
    if isinstance(raw, str):
        data = base64.b64decode(raw)
    elif isinstance(raw, list):
        data = bytes(int(b) & 0xFF for b in raw)
    else:
        raise BadRequest("batch ack bitSet is neither base64 text nor a byte array")
    return [i * 8 + bit for i, byte in enumerate(data) for bit in range(8) if byte >> bit & 1]


def encode_bitset(indexes: Iterable[int]) -> str:
    """``BitSet.toByteArray()`` of ``indexes`` as fastjson writes a ``byte[]`` (base64)."""
    idx = sorted(set(indexes))
    data = bytearray((idx[-1] // 8 + 1) if idx else 0)
    for i in idx:
        data[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(data)).decode("ascii")


def parse_batch_ack_body(body: bytes) -> tuple[str, list[BatchAck]]:
    """(brokerName, acks) of a ``BatchAckMessageRequestBody``; a field may use its long name too."""
    try:
        doc = dict(items(loads_fastjson(body)))
        acks = []
        for raw in doc.get("acks") or []:
            a = dict(items(raw))

            def get(short: str, long: str, a: dict[str, object] = a) -> object:
                return a[short] if short in a else a[long]
            start = int(str(get("so", "startOffset")))
            acks.append(BatchAck(str(get("c", "consumerGroup")), str(get("t", "topic")), str(get("r", "retry")),
                                 start, int(str(get("q", "queueId"))), int(str(get("rq", "reviveQueueId"))),
                                 int(str(get("pt", "popTime"))), int(str(get("it", "invisibleTime"))),
                                 tuple(start + i for i in bitset_offsets(get("b", "bitSet")))))
        return str(doc.get("brokerName") or ""), acks
    except (KeyError, ValueError, TypeError) as exc:
        raise BadRequest(f"malformed BatchAckMessageRequestBody: {exc}") from None
