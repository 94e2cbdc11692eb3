"""IndexFile (INVENTORY §10): a 40-byte header, ``slots`` 4-byte hash slots, ``entries`` 20-byte entries.

Header (40 bytes):

| offset | size | field                                            |
|--------|------|--------------------------------------------------|
| 0      | 8    | beginTimestamp: min store time in the file (ms)  |
| 8      | 8    | endTimestamp: max store time (ms)                |
| 16     | 8    | beginPhyOffset: min CommitLog offset             |
| 24     | 8    | endPhyOffset: max CommitLog offset               |
| 32     | 4    | hashSlotCount: used slots                        |
| 36     | 4    | indexCount: next entry number, starts at 1       |

Slot ``s`` (4 bytes) at ``40 + s*4`` holds the newest entry number of its chain (0 = empty).
Entry ``n`` (20 bytes) at ``40 + slots*4 + n*20``:

| offset | size | field                                              |
|--------|------|----------------------------------------------------|
| 0      | 4    | keyHash                                            |
| 4      | 8    | phyOffset                                          |
| 12     | 4    | timeDiff: seconds since the header beginTimestamp  |
| 16     | 4    | prevIndex: previous head of the slot chain (0 = none) |

Default 5,000,000 slots and 20,000,000 entries: 420,000,040 bytes a file.
"""

from __future__ import annotations

import struct
from typing import Any

from broker_core.codec.errors import CodecError
from broker_core.codec.hashing import py_index_key_hash
from broker_core.codec.message import KEY_SEPARATOR, TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK
from broker_core.codec.native import NATIVE

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
HASH_SLOT = struct.Struct(">i")
HASH_SLOT_SIZE = HASH_SLOT.size  # 4
INDEX_ENTRY = struct.Struct(">iqii")
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
DEFAULT_HASH_SLOTS = 5_000_000
DEFAULT_INDEX_ENTRIES = 20_000_000
INVALID_INDEX = 0


def index_file_size(slots: int, entries: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + entries * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(slots: int, index_no: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + index_no * INDEX_ENTRY_SIZE


def decode_header(
    buf: bytes | bytearray | memoryview, source: str | None = None,
) -> tuple[int, int, int, int, int, int]:
    """``(begin_ts, end_ts, begin_phy, end_phy, hash_slot_count, index_count)``."""
    if len(buf) < INDEX_HEADER_SIZE:
        raise CodecError(f"truncated IndexFile header: {len(buf)} bytes, need {INDEX_HEADER_SIZE}", source, 0)
    header = INDEX_HEADER.unpack_from(buf, 0)
    if header[5] < 1 or header[4] < 0:
        raise CodecError(f"bad IndexFile header counts: slots used {header[4]}, index count {header[5]}", source, 32)
    return header


_INT_MAX = (1 << 31) - 1


def index_entries(batch: list[tuple[Any, ...]], last_phy: int) -> tuple[list[tuple[int, int, int]], int]:
    """The index entries ``(key_hash, phy_offset, store_timestamp)`` of dispatched records ``(phy, size, topic,
    queue_id, queue_offset, tags_code, store_ts, keys, uniq_key, sys_flag)``: the unique key, then every KEYS
    value, each hashed as ``topic#key``. Records at or below ``last_phy`` (already indexed) and rolled-back
    transactions are skipped. Returns the entries and the new ``last_phy``."""
    entries: list[tuple[int, int, int]] = []
    append = entries.append
    key_hash = py_index_key_hash  # the pure twin is pure throughout
    for phy, _, topic, _, _, _, ts, keys, uniq, sys_flag in batch:
        if phy <= last_phy or (sys_flag & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE:
            continue
        if uniq:
            append((key_hash(f"{topic}#{uniq}"), phy, ts))
        if keys:
            for key in keys.split(KEY_SEPARATOR):
                if key:
                    append((key_hash(f"{topic}#{key}"), phy, ts))
        last_phy = phy
    return entries, last_phy


def put_entries(buf: Any, slots: int, index_num: int, count: int, used: int, begin_ts: int, begin_phy: int,
                entries: list[tuple[int, int, int]], start: int) -> tuple[int, int, int, int, int]:
    """Write ``entries[start:]`` into an IndexFile's writable ``buf`` (upstream ``putKey`` in a loop) until
    ``count`` reaches ``index_num``: each entry at the head of its slot's chain, ``timeDiff`` in seconds since
    ``begin_ts`` (clamped to ``[0, 2**31-1]``). The file's first entries (count 0 and 1) set ``begin_ts`` and
    ``begin_phy``. Returns ``(next_start, count, used_slots, begin_ts, begin_phy)``; the header is the
    caller's to write."""
    pack_slot = HASH_SLOT.pack_into
    unpack_slot = HASH_SLOT.unpack_from
    pack_entry = INDEX_ENTRY.pack_into
    base = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE
    i = start
    n = len(entries)
    while i < n and count < index_num:
        key_hash, phy, ts = entries[i]
        slot_pos = INDEX_HEADER_SIZE + (key_hash % slots) * HASH_SLOT_SIZE
        (prev,) = unpack_slot(buf, slot_pos)
        if prev <= INVALID_INDEX or prev > count:
            prev = INVALID_INDEX
            used += 1
        if count <= 1:
            begin_phy = phy
            begin_ts = ts
        time_diff = (ts - begin_ts) // 1000 if begin_ts > 0 else 0
        if time_diff < 0:
            time_diff = 0
        elif time_diff > _INT_MAX:
            time_diff = _INT_MAX
        pack_entry(buf, base + count * INDEX_ENTRY_SIZE, key_hash, phy, time_diff, prev)
        pack_slot(buf, slot_pos, count)
        count += 1
        i += 1
    return i, count, used, begin_ts, begin_phy


# the pure functions stay reachable for the native-vs-pure equality tests
py_index_entries, py_put_entries = index_entries, put_entries
if NATIVE is not None:
    index_entries = NATIVE.index_entries
    put_entries = NATIVE.index_put
