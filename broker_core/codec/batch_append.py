"""A SEND_BATCH_MESSAGE body (layout in :mod:`broker_core.codec.wire`) written straight into a CommitLog segment
as records (layout in :mod:`broker_core.codec.message`), without a message object per entry: the store's batch
put (``CommitLog.put_batch``) calls these under its put lock.

- :func:`check_batch` decides, before anything is written, whether every entry can be stored (the batch is all or
  nothing, as RocketMQ's).
- :func:`append_batch` writes entries from ``body_pos`` while they fit the segment, and says where it stopped.
- :func:`offset_msg_ids` is the send response's ``msgId`` for a batch.

Each record's properties are the entry's own, a ``\\x02`` when they do not end with one, then the broker's
``extra`` (``CLUSTER``), as RocketMQ joins them. ``TAGS``, ``KEYS`` and ``UNIQ_KEY`` are read from the joined
properties for the dispatcher (the last pair of a name wins, as in a dict).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from broker_core.codec.errors import CodecError
from broker_core.codec.hashing import py_java_hash_u32
from broker_core.codec.message import (
    _SHORT,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_OVERHEAD,
    HEADER,
    HEADER_SIZE,
    MAX_PROPERTIES_BYTES,
    MESSAGE_MAGIC_CODE,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
)
from broker_core.codec.message_id import encode_offset_msg_id
from broker_core.codec.native import NATIVE
from broker_core.codec.wire import _I16, BATCH_ENTRY_FIXED, BATCH_ENTRY_HEAD, batch_entries

_SEP = b"\x02"


def check_batch(body: bytes, extra_len: int, topic_len: int, max_body: int, segment_size: int
                ) -> tuple[int, str, str] | None:
    """None when every entry can be stored; else ``(index, status, reason)`` of the first that cannot, with
    status ``PROPERTIES_SIZE_EXCEEDED`` (joined properties over 32767 bytes) or ``MESSAGE_ILLEGAL`` (layout,
    properties not UTF-8, body over ``max_body``, a record larger than a segment, or no entry at all)."""
    i = 0
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < BATCH_ENTRY_FIXED:
            return i, "MESSAGE_ILLEGAL", f"truncated batch entry head at byte {pos}"
        blen = BATCH_ENTRY_HEAD.unpack_from(body, pos)[4]
        body_at = pos + BATCH_ENTRY_HEAD.size
        if blen < 0 or body_at + blen + 2 > end:
            return i, "MESSAGE_ILLEGAL", f"bad batch entry at byte {pos}: body length {blen} runs past the batch"
        (plen,) = _I16.unpack_from(body, body_at + blen)
        props_at = body_at + blen + 2
        if plen < 0 or props_at + plen > end:
            return i, "MESSAGE_ILLEGAL", (f"bad batch entry at byte {pos}: properties length {plen} runs past "
                                          "the batch")
        props = body[props_at:props_at + plen]
        try:
            props.decode()
        except UnicodeDecodeError:
            return i, "MESSAGE_ILLEGAL", "properties are not UTF-8"
        jlen = plen + (1 if plen and not props.endswith(_SEP) else 0) + extra_len
        if jlen > MAX_PROPERTIES_BYTES:
            return i, "PROPERTIES_SIZE_EXCEEDED", f"properties are {jlen} bytes, at most {MAX_PROPERTIES_BYTES}"
        if blen > max_body:
            return i, "MESSAGE_ILLEGAL", f"body is {blen} bytes, maxMessageSize is {max_body}"
        total = FIXED_OVERHEAD + blen + topic_len + jlen
        if total + END_FILE_MIN_BLANK_LENGTH > segment_size:
            return i, "MESSAGE_ILLEGAL", f"record of {total} bytes does not fit a {segment_size}-byte CommitLog segment"
        pos = props_at + plen
        i += 1
    if i == 0:
        return 0, "MESSAGE_ILLEGAL", "empty batch"
    return None


def _last(props: bytes, name: bytes) -> str | None:
    value = None
    for pair in props.split(_SEP):
        k, sep, v = pair.partition(b"\x01")
        if sep and k == name:
            value = v
    return None if value is None else value.decode()


def append_batch(buf: Any, pos: int, file_size: int, base: int, body: bytes, body_pos: int, topic: str,
                 topic_bytes: bytes, queue_id: int, queue_offset: int, extra: bytes, sys_flag: int, born_ts: int,
                 born_host: bytes, born_port: int, store_ts: int, store_host: bytes, store_port: int, reconsume: int,
                 dispatch: list[tuple[Any, ...]], phys: list[int]) -> tuple[int, int, int]:
    """Write the entries of ``body`` from byte ``body_pos`` as records at ``buf[pos:]`` (a segment of
    ``file_size`` bytes starting at CommitLog offset ``base``) while each fits with room for the end-of-segment
    blank. Appends each record's dispatch tuple ``(phy, size, topic, queue_id, queue_offset, tags_code,
    store_ts, keys, uniq_key, sys_flag)`` to ``dispatch`` and its offset to ``phys``. Returns ``(pos,
    body_pos, queue_offset)`` after the last record written; ``body_pos < len(body)`` means the segment is
    full. The caller ran :func:`check_batch` first."""
    tlen = len(topic_bytes)
    tail_head = bytes((tlen,)) + topic_bytes
    for _start, flag, body_at, blen, props_at, plen in batch_entries(body, body_pos):
        props = bytes(body[props_at:props_at + plen])
        if props:
            try:
                props.decode()
            except UnicodeDecodeError:
                raise CodecError("batch entry properties are not UTF-8", "batch", _start) from None
        joined = props + extra if not props or props.endswith(_SEP) else props + _SEP + extra
        jlen = len(joined)
        if jlen > MAX_PROPERTIES_BYTES:
            raise CodecError(f"properties are {jlen} bytes, at most {MAX_PROPERTIES_BYTES}", "batch", _start)
        total = FIXED_OVERHEAD + blen + tlen + jlen
        if total + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
            break
        msg_body = bytes(body[body_at:body_at + blen])
        phy = base + pos
        HEADER.pack_into(buf, pos, total, MESSAGE_MAGIC_CODE, zlib.crc32(msg_body) & 0x7FFFFFFF, queue_id, flag,
                         queue_offset, phy, sys_flag, born_ts, born_host, born_port, store_ts, store_host,
                         store_port, reconsume, 0, blen)
        p = pos + HEADER_SIZE
        buf[p:p + blen] = msg_body
        p += blen
        buf[p:p + 1 + tlen] = tail_head
        p += 1 + tlen
        _SHORT.pack_into(buf, p, jlen)
        buf[p + 2:p + 2 + jlen] = joined
        tags = _last(joined, PROPERTY_TAGS.encode())
        tags_code = 0
        if tags:
            h = py_java_hash_u32(tags)
            tags_code = h - 0x100000000 if h & 0x80000000 else h
        dispatch.append((phy, total, topic, queue_id, queue_offset, tags_code, store_ts,
                         _last(joined, PROPERTY_KEYS.encode()), _last(joined, PROPERTY_UNIQ_KEY.encode()), sys_flag))
        phys.append(phy)
        pos += total
        queue_offset += 1
        body_pos = props_at + plen
    return pos, body_pos, queue_offset


def offset_msg_ids(host: bytes, port: int, phys: Sequence[int]) -> str:
    """The offset message ids of records at ``phys`` on ``host:port``, joined by commas."""
    return ",".join(encode_offset_msg_id(host, port, phy) for phy in phys)


# the pure functions stay reachable for the native-vs-pure equality tests
py_check_batch, py_append_batch, py_offset_msg_ids = check_batch, append_batch, offset_msg_ids
if NATIVE is not None:
    check_batch = NATIVE.check_batch
    append_batch = NATIVE.append_batch
    offset_msg_ids = NATIVE.offset_msg_ids
