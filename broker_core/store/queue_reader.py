"""Reads behind :class:`~broker_core.store.message_store.MessageStore`: one ConsumeQueue against the CommitLog (the
pull read, ``get_message``, and the time lookup, ``get_offset_in_queue_by_time``) and the key lookup through the
IndexFiles (``query_message``).

Both only read: units come from the ConsumeQueue's mapped files and record bytes from the CommitLog, each
under the file's own reference count, so a segment retention deletes meanwhile reads as "removed", never as
garbage. Nothing here writes, locks the store or dispatches; the caller dispatches first when it needs
read-your-writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from broker_core.codec.consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, pick_units
from broker_core.codec.message import MessageRecord, decode_record
from broker_core.store.commit_log import CommitLog
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.index_file import IndexService
from broker_core.store.readahead import COMMIT_LOG_WINDOW, CONSUME_QUEUE_WINDOW, read_ahead
from broker_core.store.results import GetMessageResult, GetStatus, QueryMessageResult

UNIT_SCAN_BYTES = 16000  # ConsumeQueue bytes examined per pull at least (upstream maxFilterMessageCount)


def unit_scan_bytes(max_msg_nums: int) -> int:
    """ConsumeQueue bytes a pull of ``max_msg_nums`` examines: RocketMQ's ``maxFilterMessageCount``,
    ``max(16000, maxMsgNums * 20)``, so a pull of more than 800 messages is not cut at 800 units."""
    return max(UNIT_SCAN_BYTES, max_msg_nums * CQ_STORE_UNIT_SIZE)


def read_queue(commit_log: CommitLog, cq: ConsumeQueue, offset: int, max_msg_nums: int,
               tag_hashes: set[int] | None, max_bytes: int, decode: bool, views: bool = False) -> GetMessageResult:
    """Up to ``max_msg_nums`` messages (at most ``max_bytes``, one at least) of ``cq`` from logical ``offset``,
    filtered by tag hash, with RocketMQ's statuses for offsets outside the queue. With ``decode=False``
    ``chunks`` holds runs of whole records as stored; ``queue_offsets`` has one entry per record either way.
    With ``views=True`` (and ``decode=False``) the runs are memoryviews of the mapped segments, not copies, and
    the result holds their segments until :meth:`GetMessageResult.release` (RocketMQ's zero-copy transfer).
    With ``dataReadAheadEnable`` a read a window or more behind the end first advises the ConsumeQueue and the
    CommitLog past it (``readahead.read_ahead``)."""
    min_off = cq.get_min_offset_in_queue()
    max_off = cq.get_max_offset_in_queue()
    if max_off == 0:
        return GetMessageResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
    if offset < min_off:
        return GetMessageResult(GetStatus.OFFSET_TOO_SMALL, min_off, min_off, max_off,
                                error=f"offset {offset} is below the queue's min offset {min_off}")
    if offset == max_off:
        return GetMessageResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
    if offset > max_off:
        return GetMessageResult(GetStatus.OFFSET_OVERFLOW_BADLY, min_off if min_off == 0 else max_off,
                                min_off, max_off, error=f"offset {offset} is past the queue's max offset {max_off}")
    ahead = commit_log.config.data_read_ahead_enable  # cold sequential reads: the next window is read meanwhile
    if ahead:
        read_ahead(cq.mapped_file_queue, offset * CQ_STORE_UNIT_SIZE, CONSUME_QUEUE_WINDOW)
    result = cq.get_index_buffer(offset)
    if result is None:
        units_per_file = cq.mapped_file_size // CQ_STORE_UNIT_SIZE
        nxt = (offset // units_per_file + 1) * units_per_file
        return GetMessageResult(GetStatus.OFFSET_FOUND_NULL, nxt, min_off, max_off)
    out = GetMessageResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_off, max_off)
    try:
        buf = result.buffer
        runs, phys, queue_offsets, end, removed = pick_units(
            buf, min(len(buf), unit_scan_bytes(max_msg_nums)), max_msg_nums, commit_log.min_offset(), tag_hashes,
            max_bytes, offset)
        out.next_begin_offset = offset + end // CQ_STORE_UNIT_SIZE
    finally:
        result.release()
    if ahead and runs:
        read_ahead(commit_log.mapped_file_queue, runs[0][0], COMMIT_LOG_WINDOW)
    # Each run of records that sit back to back in the CommitLog is read with one copy.
    for i, (start, length, first) in enumerate(runs):
        last = runs[i + 1][2] if i + 1 < len(runs) else len(phys)
        if views and not decode:
            held = commit_log.select_message_bytes(start, length)
            if held is None:
                removed = True
                continue
            out.holds.append(held)
            out.chunks.append(held.buffer)  # type: ignore[arg-type]  # a memoryview: bytes-like, not copied
            out.queue_offsets.extend(queue_offsets[first:last])
            continue
        data = commit_log.get_message_bytes(start, length)
        if data is None:
            removed = True
            continue
        if decode:
            mv = memoryview(data)
            for k in range(first, last):
                out.messages.append(decode_record(mv, phys[k] - start, base_offset=start, check_crc=False))
        else:
            out.chunks.append(data)  # raw: whole runs, concatenated by the caller
        out.queue_offsets.extend(queue_offsets[first:last])
    if out.queue_offsets:
        out.status = GetStatus.FOUND
    elif removed:
        out.status = GetStatus.MESSAGE_WAS_REMOVING
    return out


def offset_by_time(commit_log: CommitLog, cq: ConsumeQueue, timestamp_ms: int) -> int:
    """The first queue offset whose message was stored at or after ``timestamp_ms`` (the max offset when
    none is): a binary search over the units' store timestamps."""
    lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
    while lo < hi:
        mid = (lo + hi) // 2
        unit = cq.get_unit(mid)
        ts = -1 if unit is None or unit[1] == BLANK_UNIT_SIZE else commit_log.pickup_store_timestamp(
            unit[0], unit[1])
        if ts < timestamp_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo


def query_by_key(index: IndexService, look: Callable[[int], MessageRecord | None], topic: str, key: str, want: int,
                 begin_ms: int, end_ms: int) -> QueryMessageResult:
    """Messages of ``topic`` with ``key`` among their KEYS or as unique key, stored in ``[begin_ms, end_ms]``,
    newest first, at most ``want``: index candidates read back with ``look`` so hash collisions drop out, asking
    the index for more while collisions leave too few. ``truncated`` says more matches exist."""
    limit = want + 1
    while True:
        offsets, more = index.query_offsets(topic, key, limit, begin_ms, end_ms)
        found = []
        for phy in offsets:
            rec = look(phy)
            if rec is not None and rec.topic == topic and (key in rec.keys or rec.uniq_key == key):
                found.append(rec)
        if len(found) > want or not more:
            break
        limit *= 4
    ts, phy = index.last_update()
    return QueryMessageResult(found[:want], len(found) > want, ts, phy)


def in_disk(commit_log: CommitLog, cq: ConsumeQueue, offset: int, in_memory_ratio_percent: int) -> bool:
    """RocketMQ's "in disk" test: whether the message at ``offset`` lies further behind the CommitLog's end
    than ``in_memory_ratio_percent`` of physical RAM; False when there is no such message."""
    unit = cq.get_unit(offset)
    if unit is None:
        return False
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * in_memory_ratio_percent / 100
    return commit_log.max_offset() - unit[0] > memory
