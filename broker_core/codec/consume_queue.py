"""ConsumeQueue unit (INVENTORY §9), 20 bytes, big-endian.

| offset | size | field                              |
|--------|------|------------------------------------|
| 0      | 8    | CommitLog physical offset (long)   |
| 8      | 4    | message size (int)                 |
| 12     | 8    | tagsCode (long): tag hash, or the deliver time for the delay topic |

Unit ``n`` of a queue lives at byte ``n * 20``; a file holds 300,000 units (6,000,000 bytes). A unit whose
size is 0 marks the end of written data. A unit written to pad the start of a queue whose first file
does not begin at offset 0 has physical offset 0 and size ``BLANK_UNIT_SIZE``.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from typing import Any

from broker_core.codec.errors import CodecError
from broker_core.codec.native import NATIVE

CQ_UNIT = struct.Struct(">qiq")
CQ_STORE_UNIT_SIZE = CQ_UNIT.size  # 20
DEFAULT_UNITS_PER_FILE = 300_000
BLANK_UNIT_SIZE = 0x7FFFFFFF


def encode_unit(phy_offset: int, size: int, tags_code: int) -> bytes:
    return CQ_UNIT.pack(phy_offset, size, tags_code)


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0, source: str | None = None) -> tuple[int, int, int]:
    """``(phy_offset, size, tags_code)``; raises :class:`CodecError` on a short buffer."""
    if pos < 0 or pos + CQ_STORE_UNIT_SIZE > len(buf):
        raise CodecError(f"truncated ConsumeQueue unit: need {CQ_STORE_UNIT_SIZE} bytes", source, pos)
    return CQ_UNIT.unpack_from(buf, pos)


def scan_units(buf: bytes | bytearray | memoryview, pos: int, limit: int) -> tuple[int, int, bool]:
    """Walk written units from byte ``pos`` below ``limit`` (whole units only): ``(end, max_phy, stopped)``, with
    ``end`` the byte after the last written unit, ``max_phy`` the end (offset + size) of the last unit that is
    not a blank pad (-1 when none), ``stopped`` True when a unit with size <= 0 or a negative offset (the end of
    written data) was met before ``limit``."""
    max_phy = -1
    unpack = CQ_UNIT.unpack_from
    while pos + CQ_STORE_UNIT_SIZE <= limit:
        offset, size, _ = unpack(buf, pos)
        if size <= 0 or offset < 0:
            return pos, max_phy, True
        if size != BLANK_UNIT_SIZE:
            max_phy = offset + size
        pos += CQ_STORE_UNIT_SIZE
    return pos, max_phy, False


def pick_units(buf: bytes | bytearray | memoryview, limit: int, max_nums: int, min_phy: int,
               tag_hashes: set[int] | None, max_bytes: int,
               base_offset: int) -> tuple[list[tuple[int, int, int]], list[int], list[int], int, bool]:
    """The units a pull reads, walking from byte 0 below ``limit`` (and the buffer's end; whole units only): at
    most ``max_nums``, skipping blank pads, units below ``min_phy`` (their records were deleted: ``removed``) and, with
    ``tag_hashes``, units whose tags code is not in it; stopping before a unit that would take the picked
    sizes past ``max_bytes`` (the first unit is always taken).

    Returns ``(runs, phys, queue_offsets, end, removed)``: ``phys``/``queue_offsets`` per picked unit (queue
    offset = ``base_offset`` + unit index); ``runs`` the picked records that sit back to back in the CommitLog,
    as ``(start_phy, length, first)`` with ``first`` the index of the run's first unit in ``phys`` (a run ends
    where the next run starts); ``end`` the byte after the last unit looked at (a unit that broke the byte limit
    was not looked at)."""
    runs: list[tuple[int, int, int]] = []
    phys: list[int] = []
    offsets: list[int] = []
    unpack = CQ_UNIT.unpack_from
    removed = False
    total = 0
    run_end = -1
    pos = 0
    limit = min(limit, len(buf))  # a limit past the buffer stops at its end (as the C twin)
    while pos + CQ_STORE_UNIT_SIZE <= limit and len(phys) < max_nums:
        phy, size, tags_code = unpack(buf, pos)
        pos += CQ_STORE_UNIT_SIZE
        if size == BLANK_UNIT_SIZE:
            continue
        if phy < min_phy:
            removed = True
            continue
        if tag_hashes is not None and tags_code not in tag_hashes:
            continue
        if phys and total + size > max_bytes:
            pos -= CQ_STORE_UNIT_SIZE
            break
        if runs and phy == run_end:  # a run to extend (not a sentinel: a corrupt unit may name offset -1)
            start, length, first = runs[-1]
            runs[-1] = (start, length + size, first)
        else:
            runs.append((phy, size, len(phys)))
        run_end = phy + size
        phys.append(phy)
        offsets.append(base_offset + pos // CQ_STORE_UNIT_SIZE - 1)
        total += size
    return runs, phys, offsets, pos, removed


_TRANSACTION_TYPE_MASK = 0x3 << 2
_TO_QUEUE = (0, 0x2 << 2)  # not a transaction, or a committed one (prepared and rolled back stay out)


def group_units(batch: list[tuple[Any, ...]]) -> dict[tuple[str, int], list[tuple[int, int, int, int]]]:
    """The ConsumeQueue units of dispatched records ``(phy, size, topic, queue_id, queue_offset, tags_code,
    store_ts, keys, uniq_key, sys_flag)``, per queue ``(topic, queue_id)`` in first-seen order, each list in the
    batch's order: ``(phy, size, tags_code, queue_offset)``, the arguments of ``put_message_position_info``.
    Prepared and rolled-back transaction records have no unit."""
    out: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
    for phy, size, topic, queue_id, queue_offset, tags_code, _, _, _, sys_flag in batch:
        if (sys_flag & _TRANSACTION_TYPE_MASK) in _TO_QUEUE:
            key = (topic, queue_id)
            units = out.get(key)
            if units is None:
                units = out[key] = []
            units.append((phy, size, tags_code, queue_offset))
    return out


_I64 = (-(1 << 63), (1 << 63) - 1)
_I32 = (-(1 << 31), (1 << 31) - 1)


def pack_units(buf: Any, pos: int, end: int, units: Sequence[tuple[int, int, int, int]], start: int, stop: int,
               expect: int, min_end: int) -> int:
    """Write ``units[start:stop]`` (``group_units``' ``(phy, size, tags_code, queue_offset)``) as consecutive
    units at ``buf[pos:end]`` while each is the queue's next one (its queue offset is ``expect`` plus the number
    written before it), ends in the CommitLog past the one before (``phy + size`` over ``min_end`` at first: not a
    replay; and within 64 bits), fits below ``end`` and has fields the layout holds (plain ints in range); returns
    how many were written. The unit it stops at is left to the caller (``ConsumeQueue.put_message_position_info``)."""
    n = 0
    for i in range(start, stop):
        if pos + CQ_STORE_UNIT_SIZE > end:
            break
        u = units[i]
        if type(u) is not tuple or len(u) != 4:
            break
        phy, size, tags_code, queue_offset = u
        if (type(phy) is not int or type(size) is not int or type(tags_code) is not int
                or type(queue_offset) is not int or queue_offset != expect + n
                or not _I64[0] <= phy <= _I64[1] or not _I32[0] <= size <= _I32[1]
                or not _I64[0] <= tags_code <= _I64[1] or not min_end < phy + size <= _I64[1]):
            break
        min_end = phy + size
        CQ_UNIT.pack_into(buf, pos, phy, size, tags_code)
        pos += CQ_STORE_UNIT_SIZE
        n += 1
    return n


def take_pending(pending: deque[tuple[Any, ...]], batch: list[tuple[Any, ...]], offset: int, limit: int,
                 max_n: int) -> int:
    """The dispatcher's drain of the put path's hand-off (``CommitLog.pending_dispatch``): move entries
    ``(phy, size, ...)`` from the front of ``pending`` to ``batch`` while each starts at ``offset`` and ends by
    ``limit`` and ``batch`` holds fewer than ``max_n``; returns the offset after the last one moved. It also stops
    right after an entry when the next does not start where that one ended (the caller looks for a segment roll)."""
    while pending and len(batch) < max_n:
        d = pending[0]
        if d[0] != offset or offset + d[1] > limit:
            break
        batch.append(pending.popleft())
        offset += d[1]
        if pending and pending[0][0] != offset:
            break
    return offset


# the pure functions stay reachable for the native-vs-pure equality tests
py_scan_units, py_group_units, py_pick_units = scan_units, group_units, pick_units
py_pack_units, py_take_pending = pack_units, take_pending
if NATIVE is not None:
    scan_units = NATIVE.scan_units
    pick_units = NATIVE.pick_units
    group_units = NATIVE.group_units
    pack_units = NATIVE.pack_units
    take_pending = NATIVE.take_pending
