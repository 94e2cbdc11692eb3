"""Walks over records stored back to back (layout in :mod:`broker_core.codec.message`): recovery's validating
scan of a CommitLog segment and the one decoding walk every reader of a pull, query or view body uses; and the
one rewrite of a stored record's header a reader makes (its RECONSUMETIMES for a POP redelivery)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from broker_core.codec.errors import CodecError
from broker_core.codec.hashing import py_java_hash_u32
from broker_core.codec.message import (
    _SHORT,
    _SIZE_MAGIC,
    BLANK_MAGIC_CODE,
    COMPRESSED_FLAG,
    F_MAGIC,
    FIXED_OVERHEAD,
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    OFFSET_RECONSUME_TIMES,
    PROPERTY_DELAY_TIME_LEVEL,
    check_record,
)
from broker_core.codec.native import NATIVE

T = TypeVar("T")

SCAN_BLANK = "blank"
SCAN_END = "end of data"
SCAN_LIMIT = "limit"
_INT = struct.Struct(">i")


def scan_records(
    buf: bytes | bytearray | memoryview,
    pos: int,
    limit: int,
    check_crc: bool = True,
) -> tuple[int, str]:
    """Walk whole records from ``pos`` while they are valid. Returns ``(end, why)``: ``end`` is the
    position after the last valid record (or of the blank record), ``why`` is :data:`SCAN_BLANK`,
    :data:`SCAN_END` (zeros), :data:`SCAN_LIMIT`, or the reason the next record is invalid."""
    unpack_sm = _SIZE_MAGIC.unpack_from
    header = HEADER.unpack_from
    crc32 = zlib.crc32
    while True:
        if pos + 8 > limit:
            return pos, SCAN_LIMIT
        total, magic = unpack_sm(buf, pos)
        if magic == MESSAGE_MAGIC_CODE:
            if total < FIXED_OVERHEAD or pos + total > limit:
                return pos, f"truncated record of size {total}"
            fields = header(buf, pos)
            blen = fields[16]
            p = pos + HEADER_SIZE
            if blen < 0 or p + blen + 3 > pos + total:
                return pos, f"inconsistent body length {blen}"
            tp = p + blen
            tlen = buf[tp]
            pp = tp + 1 + tlen
            if pp + 2 > pos + total or pp + 2 + _SHORT.unpack_from(buf, pp)[0] != pos + total:
                return pos, "inconsistent topic or properties length"
            if check_crc:
                c = crc32(buf[p:p + blen])
                if fields[2] != c & 0x7FFFFFFF and fields[2] != c:  # RocketMQ's masked CRC, or ours before it
                    return pos, "body CRC mismatch"
            pos += total
        elif magic == BLANK_MAGIC_CODE:
            return pos, SCAN_BLANK
        elif total == 0 and magic == 0:
            return pos, SCAN_END
        else:
            return pos, f"bad magic code 0x{magic:08X}"


def walk_records(buf: bytes | bytearray | memoryview, source: str = "response"
                 ) -> list[tuple[tuple[Any, ...], bytes, str, bytes]]:
    """Records stored back to back (a pull, query or view body): per record its header fields (index them with
    the ``F_*`` constants), the body as stored (compressed if ``F_SYS_FLAG`` says so), the topic and the raw
    properties. No CRC check (the broker checked on write). Raises :class:`CodecError` on a record that does not
    fit; the SDK's and every other reader's one walk over such a buffer."""
    data = buf if isinstance(buf, bytes) else bytes(buf)  # one copy up front: slices below are then bytes
    out: list[tuple[tuple[Any, ...], bytes, str, bytes]] = []
    append = out.append
    pos = 0
    end = len(data)
    unpack = HEADER.unpack_from
    while pos + HEADER_SIZE <= end:
        fields = unpack(data, pos)
        total = fields[0]  # F_TOTAL_SIZE
        if fields[1] != MESSAGE_MAGIC_CODE or total < FIXED_OVERHEAD or pos + total > end:
            raise CodecError(f"bad record (magic 0x{fields[F_MAGIC]:08X}, size {total})", source, pos)
        blen = fields[16]  # F_BODY_LENGTH
        if blen < 0 or HEADER_SIZE + blen + 3 > total:
            raise CodecError(f"bad record (body length {blen}, size {total})", source, pos)
        p = pos + HEADER_SIZE
        q = p + blen
        tlen = data[q]
        if HEADER_SIZE + blen + 3 + tlen > total:
            raise CodecError(f"bad record (topic length {tlen}, size {total})", source, pos)
        append((fields, data[p:q], data[q + 1:q + 1 + tlen].decode(), data[q + 3 + tlen:pos + total]))
        pos += total
    return out


def decode_pulled(buf: bytes | bytearray | memoryview, source: str, factory: Callable[..., T],
                  broker_name: Any) -> list[T]:
    """Records as a broker sends them (a pull, query or view body) straight to message objects:
    ``factory(topic, body, queue_id, queue_offset, commit_log_offset, born_timestamp, store_timestamp,
    (born_ip4, born_port), (store_ip4, store_port), reconsume_times, broker_name, properties, sys_flag)`` per
    record, with a compressed body inflated and ``properties`` the raw properties bytes (``name\x01value\x02``
    pairs, as stored; the message object decodes them on first use, so a consumer that never looks at them
    never pays for them, and bytes that are not UTF-8 fail that use, not the pull). Raises :class:`CodecError`
    on a record that does not fit or a body that does not inflate (at the record's CommitLog offset)."""
    out = []
    for (_, _, _, queue_id, _, queue_offset, phy, sys_flag, born_ts, born_ip, born_port, store_ts, store_ip,
         store_port, reconsume, _, _), body, topic, raw_props in walk_records(buf, source):
        if sys_flag & COMPRESSED_FLAG:
            try:
                body = zlib.decompress(body)
            except zlib.error as exc:
                raise CodecError(f"compressed body does not inflate: {exc}", source, phy) from None
        out.append(factory(topic, body, queue_id, queue_offset, phy, born_ts, store_ts, (born_ip, born_port),
                           (store_ip, store_port), reconsume, broker_name, raw_props, sys_flag))
    return out


def parse_dispatch(buf: bytes | bytearray | memoryview, pos: int, limit: int, max_n: int, schedule_topic: str,
                   delay_ms: Callable[[int], int] | None) -> tuple[list[tuple[Any, ...]], int, str]:
    """The dispatcher's parse of records it did not get from the put path (recovery replay): from ``pos``, up
    to ``max_n`` records below ``limit``, each as a dispatch tuple ``(phy, size, topic, queue_id, queue_offset,
    tags_code, store_ts, keys, uniq_key, sys_flag)`` with ``phy`` the record's own PHYSICALOFFSET. ``tags_code``
    is the tag's hash, or for ``schedule_topic`` records (with ``delay_ms``) the store time plus the delay of
    the record's DELAY level (1 when absent). Returns ``(entries, end, why)``: ``why`` is ``""`` (limit or
    ``max_n`` reached), ``"blank"`` (end of segment at ``end``) or why the record at ``end`` is not valid
    (``check_record``'s reasons). No CRC check (the put path computed it)."""
    out: list[tuple[Any, ...]] = []
    while pos < limit and len(out) < max_n:
        req = check_record(buf, pos, limit, False)
        if not req.success:
            return out, pos, req.error
        if req.msg_size == 0:
            return out, pos, "blank"
        if req.topic == schedule_topic and delay_ms is not None:
            level = int((req.properties or {}).get(PROPERTY_DELAY_TIME_LEVEL, "1") or 1)
            tags_code = req.store_timestamp + delay_ms(max(level, 1))
        else:
            h = py_java_hash_u32(req.tags) if req.tags else 0
            tags_code = h - 0x100000000 if h & 0x80000000 else h
        out.append((req.commit_log_offset, req.msg_size, req.topic, req.queue_id, req.consume_queue_offset,
                    tags_code, req.store_timestamp, req.keys, req.uniq_key, req.sys_flag))
        pos += req.msg_size
    return out, pos, ""


# the pure functions stay reachable for the native-vs-pure equality tests
py_scan_records, py_decode_pulled = scan_records, decode_pulled
py_parse_dispatch = parse_dispatch
if NATIVE is not None:
    scan_records = NATIVE.scan_records
    decode_pulled = NATIVE.decode_pulled
    parse_dispatch = NATIVE.parse_dispatch


def with_reconsume_times(raw: bytes, times: int) -> bytes:
    """A copy of the record ``raw`` (one whole record) whose RECONSUMETIMES field reads ``times`` (a POP
    redelivery hands out the stored record with its count, as RocketMQ's retry records carry theirs)."""
    out = bytearray(raw)
    _INT.pack_into(out, OFFSET_RECONSUME_TIMES, times)
    return bytes(out)
