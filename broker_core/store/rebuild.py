"""Start-up checks of the derived files (ConsumeQueues, IndexFiles) against the recovered CommitLog, and the
replay start that rebuilds what they lack.

Both are derived data: the dispatcher can rebuild them from the CommitLog, and replaying a range is idempotent
(ConsumeQueues skip units they hold, the index skips offsets at or below ``last_indexed_phy``). So a missing or
corrupt derived file never stops the broker: it is deleted (ERROR log) and the replay start moves back to the
first record it lacked. What is checked:

1. At load (``consume_queue.load_consume_queues``, ``IndexService.load``): a ConsumeQueue file of the wrong size
   or after a gap (a deleted file) is deleted with those after it; an IndexFile that cannot be opened or fails
   ``index_file.damage`` is deleted.
2. Each ConsumeQueue file's last unit must point at a record of that topic, queue and queue offset; the queue is
   cut at the first file that fails (units whose records retention removed cannot be checked and pass).
3. Records in the recovery window (the last three CommitLog segments) are compared with the ConsumeQueues: a
   queue whose directory exists but lacks units for records the replay would not reach (a deleted last file, or
   every file deleted) is rebuilt from its last unit. A queue without a directory is taken as deleted
   (``delete_topic`` removes it) and is not resurrected from older records.
4. After each IndexFile's last entry, the next record with a unique key must be findable through the index (the
   same for the CommitLog's first such record when no IndexFile is left), else the index is rebuilt from that
   file's last record (whose keys may have straddled into the lost file; lookups de-duplicate offsets).

Limit: a ConsumeQueue that lost its last file and has no record in the recovery window is not detected by 3
(its consumers see the queue end early); delete the queue's files, keeping its directory, to have it rebuilt.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker_core.codec import CodecError
from broker_core.codec.consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT, group_units
from broker_core.codec.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageRecord,
)
from broker_core.codec.records import parse_dispatch
from broker_core.store.consume_queue import ConsumeQueue
from broker_core.store.consume_queue import load_consume_queues as _load_cqs
from broker_core.store.schedule import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from broker_core.store.commit_log import CommitLog
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)

_WINDOW_SEGMENTS = 3
_WALK_LIMIT = 64  # records looked at after an IndexFile's end for one with a unique key


def load_consume_queues(store: StoreParts) -> dict[tuple[str, int], str]:
    """Load every ConsumeQueue into the store's table; returns the queues damaged at load, with the reason."""
    table, damaged = _load_cqs(store.store_config.consume_queue_dir,
                               store.store_config.mapped_file_size_consume_queue_bytes)
    store.consume_queue_table.update(table)
    return damaged


def index_keys_at(store: StoreParts, phy_offset: int) -> list[str] | None:
    """The index keys (``topic#UNIQ_KEY``, ``topic#KEYS`` values) of the record at ``phy_offset``."""
    rec = store.look_message_by_offset(phy_offset)
    if rec is None:
        return None
    keys = ([rec.uniq_key] if rec.uniq_key else []) + rec.keys
    return [f"{rec.topic}#{k}" for k in keys]


def replay_start(store: StoreParts, reput_from: int, damaged_cqs: dict[tuple[str, int], str]) -> int:
    """The dispatcher's start, moved back as far as the checks (module docstring) need."""
    commit_log = store.commit_log
    min_off = commit_log.min_offset()
    if min_off < 0:
        return reput_from
    points = [reput_from]
    for key, why in damaged_cqs.items():
        cq = store.consume_queue_table[key]
        log.error("ConsumeQueue %s-%d: %s; rebuilding it from the CommitLog", key[0], key[1], why)
        points.append(_queue_end(cq, min_off))
    for cq in store.consume_queues():
        point = _check_units(commit_log, cq, min_off)
        if point is not None:
            points.append(point)
    points.extend(_check_window(store, reput_from, min_off))
    if store.index_service is not None:
        point = _check_index(store, reput_from, min_off)
        if point is not None:
            points.append(point)
            store.index_service.last_indexed_phy = min(store.index_service.last_indexed_phy, point - 1)
    return max(min(points), min_off)


def _queue_end(cq: ConsumeQueue, min_off: int) -> int:
    return cq.max_physic_offset if cq.max_physic_offset >= 0 else min_off


def _check_units(commit_log: CommitLog, cq: ConsumeQueue, min_off: int) -> int | None:
    """Check 2: cut the queue at its first file whose last unit does not match its record; the replay point."""
    mfq = cq.mapped_file_queue
    for mf in mfq.files:
        pos = mf.wrote_position - CQ_STORE_UNIT_SIZE
        while pos >= 0:
            phy, size, _ = CQ_UNIT.unpack_from(mf.mv, pos)
            if size != BLANK_UNIT_SIZE:
                break
            pos -= CQ_STORE_UNIT_SIZE
        if pos < 0 or phy < min_off:
            continue
        index = (mf.file_from_offset + pos) // CQ_STORE_UNIT_SIZE
        try:
            rec = commit_log.look_message_by_offset(phy, size) if size > 0 else None
        except CodecError:
            rec = None
        if rec is not None and (rec.topic, rec.queue_id, rec.queue_offset, rec.commit_log_offset) == \
                (cq.topic, cq.queue_id, index, phy):
            continue
        log.error("ConsumeQueue %s-%d: unit %d in %s does not match the CommitLog record at %d; cutting the queue "
                  "there and rebuilding it from the CommitLog", cq.topic, cq.queue_id, index, mf.path.name, phy)
        mfq.truncate_dirty_files(mf.file_from_offset)
        cq.truncate_dirty_logic_files(commit_log.max_offset())
        return _queue_end(cq, min_off)
    return None


Unit = tuple[int, int, int, int]  # (phy, size, tags_code, queue offset)


def _window_units(commit_log: CommitLog, start: int) -> Iterator[tuple[tuple[str, int], list[Unit]]]:
    """The ConsumeQueue units (per queue) of the records from ``start`` to the CommitLog's end."""
    offset = start
    while True:
        result = commit_log.get_data(offset)
        if result is None:
            return
        why = ""
        pos = 0
        try:
            buf = result.buffer
            while pos < len(buf):
                batch, pos, why = parse_dispatch(buf, pos, len(buf), 1024, SCHEDULE_TOPIC, None)
                yield from group_units(batch).items()
                if why:
                    break
        finally:
            result.release()
        if why != "blank":
            return
        offset = commit_log.roll_next_file(result.start_offset + pos)


def _check_window(store: StoreParts, reput_from: int, min_off: int) -> list[int]:
    """Check 3: queues lacking units for records in the recovery window that the replay will not reach."""
    commit_log = store.commit_log
    files = commit_log.mapped_file_queue.files
    start = files[max(0, len(files) - _WINDOW_SEGMENTS)].file_from_offset
    table = store.consume_queue_table
    checked: set[tuple[str, int]] = set()
    points = []
    for key, units in _window_units(commit_log, max(start, min_off)):
        cq = table.get(key)
        if cq is None or key in checked:
            continue
        end = cq.max_physic_offset
        missing = next((u for u in units if u[0] >= end), None)
        if missing is None:
            continue
        checked.add(key)
        if missing[0] < reput_from or missing[3] > cq.get_max_offset_in_queue():
            log.error("ConsumeQueue %s-%d lacks the unit of queue offset %d (CommitLog %d), which replay would not "
                      "write; rebuilding it from the CommitLog", key[0], key[1], missing[3], missing[0])
            points.append(_queue_end(cq, min_off))
    return points


def _records_after(commit_log: CommitLog, offset: int) -> Iterator[MessageRecord]:
    """Records from ``offset`` (a record boundary) on, across segment ends, at most ``_WALK_LIMIT``."""
    end = commit_log.max_offset()
    for _ in range(_WALK_LIMIT):
        head = commit_log.get_message_bytes(offset, 8)
        if head is None:
            return
        size, magic = int.from_bytes(head[:4], "big", signed=True), int.from_bytes(head[4:], "big")
        if magic == BLANK_MAGIC_CODE:
            offset = commit_log.roll_next_file(offset)
            if offset >= end:
                return
            continue
        if magic != MESSAGE_MAGIC_CODE or size <= 0:
            return
        try:
            rec = commit_log.look_message_by_offset(offset, size)
        except CodecError:
            return
        if rec is None:
            return
        yield rec
        offset += size


def _check_index(store: StoreParts, reput_from: int, min_off: int) -> int | None:
    """Check 4: the first record with a unique key after each IndexFile's end must be found; the replay point."""
    service = store.index_service
    assert service is not None
    commit_log = store.commit_log
    starts = [(f.end_phy_offset, True) for f in service.files if f.index_count > 1 and f.end_phy_offset >= min_off]
    if not any(f.index_count > 1 for f in service.files):
        starts = [(min_off, False)]
    for start, after in starts:
        records = _records_after(commit_log, start)
        if after:
            next(records, None)  # the file's own last record
        for rec in records:  # not skipped when the replay reaches it: the file's last record may be half indexed
            if not rec.uniq_key or (rec.sys_flag & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE:
                continue
            found, _ = service.query_offsets(rec.topic, rec.uniq_key, 16, 0, 1 << 62)
            if rec.commit_log_offset not in found:
                # behind the CommitLog after a crash is expected (the replay reaches it); anything else is damage
                expected = rec.commit_log_offset >= reput_from and rec.commit_log_offset > service.last_indexed_phy
                log.log(logging.INFO if expected else logging.ERROR, "the index lacks the record at %d (key %s#%s); "
                        "rebuilding it from %d", rec.commit_log_offset, rec.topic, rec.uniq_key, start)
                return start
            break
    return None
