"""ConsumeQueue: the per (topic, queue id) array of 20-byte units pointing into the CommitLog (INVENTORY §9).

Invariants:
1. Unit ``n`` (logical queue offset ``n``) is at byte ``n * 20`` of the queue's byte space; files hold
   ``mapedFileSizeConsumeQueue / 20`` units and are named by their first byte offset.
2. Units are written by the dispatcher only, in CommitLog order, so their physical offsets increase;
   ``max_physic_offset`` is the end (offset + size) of the last dispatched record.
3. Writing a unit that is already there (replay after a crash) is a no-op; a unit past a gap pads the
   gap with blank units (size ``BLANK_UNIT_SIZE``), which readers skip.
4. ``min_logic_offset`` (bytes) is the first unit whose record is still in the CommitLog.

5. Dirty tracking: every write path (:meth:`ConsumeQueue.put_message_position_info`, :meth:`ConsumeQueue.put_units`)
   marks its queue dirty *after* writing the unit: it sets ``_dirty`` and adds the queue to its root's
   :class:`DirtyQueues` (one per ConsumeQueue directory, shared by the store's queues). The flusher takes the
   set, clearing each queue's flag *before* it flushes that queue, so a unit written during a flush either is
   covered by it or marks the queue dirty again; a queue left with unflushed units after its flush (fewer
   than ``least_pages`` dirty pages, or units in a second file) is marked again. Hence a queue holding units
   not yet flushed is always in the set or being flushed, and a pass costs the queues written since the
   last one, not every queue of the broker (400k at 50k topics of 8 queues).

Crash behaviour: units live in the page cache like CommitLog records. On recovery the last three files
are scanned to the first empty unit; units pointing past the recovered CommitLog end are truncated; on
an abnormal exit the dispatcher replays CommitLog records, and rewrites of existing units are no-ops.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker_core.codec.consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT, pack_units, scan_units
from broker_core.codec.names import SCHEDULE_TOPIC
from broker_core.store.mapped_file import MappedFile, SelectMappedBufferResult
from broker_core.store.mapped_file_queue import MappedFileQueue

if TYPE_CHECKING:
    from broker_core.store.commit_log import CommitLog

log = logging.getLogger(__name__)

UNIT = CQ_STORE_UNIT_SIZE


class DirtyQueues:
    """The queues of one ConsumeQueue directory written since their last flush (invariant 5)."""

    def __init__(self) -> None:
        self._queues: set[ConsumeQueue] = set()

    def mark(self, cq: ConsumeQueue) -> None:
        cq._dirty = True
        self._queues.add(cq)

    def discard(self, cq: ConsumeQueue) -> None:
        self._queues.discard(cq)
        cq._dirty = False

    def take(self) -> list[ConsumeQueue]:
        """Every queue marked so far, each flag cleared (set.pop is atomic: writers may mark meanwhile)."""
        out: list[ConsumeQueue] = []
        queues = self._queues
        while True:
            try:
                cq = queues.pop()
            except KeyError:
                return out
            cq._dirty = False
            out.append(cq)

    def __len__(self) -> int:
        return len(self._queues)


_DIRTY: weakref.WeakValueDictionary[str, DirtyQueues] = weakref.WeakValueDictionary()
_DIRTY_LOCK = threading.Lock()


def dirty_queues(root: Path) -> DirtyQueues:
    """The :class:`DirtyQueues` of the ConsumeQueue directory ``root`` (alive while a queue or flusher holds it)."""
    key = str(root.resolve())
    with _DIRTY_LOCK:
        dirty = _DIRTY.get(key)
        if dirty is None:
            dirty = _DIRTY[key] = DirtyQueues()
        return dirty


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root: Path, mapped_file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.mapped_file_queue = MappedFileQueue(root / topic / str(queue_id), mapped_file_size)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self._tail: MappedFile | None = None  # the file the last unit went to (fast path)
        self._dirty = False  # in ``_dirty_set`` (invariant 5)
        self._dirty_set = dirty_queues(root)

    # ------------------------------------------------------------------ load and recovery
    def load(self) -> str:
        """Open the files; a damaged file and those after it are deleted and the reason returned (see
        ``MappedFileQueue.load(derived=True)``): the caller rebuilds them from the CommitLog."""
        return self.mapped_file_queue.load(derived=True)

    def recover(self) -> None:
        """Find the end of written units in the last three files and cut everything after it."""
        files = self.mapped_file_queue.files
        if not files:
            return
        index = max(0, len(files) - 3)
        mf = files[index]
        process_offset = mf.file_from_offset
        pos = 0
        max_phy = -1
        while True:
            pos, file_max, end_of_data = scan_units(mf.mv, pos, self.mapped_file_size)
            if file_max >= 0:
                max_phy = file_max
            if end_of_data or index + 1 >= len(files):
                process_offset = mf.file_from_offset + pos
                break
            index += 1
            mf = files[index]
            pos = 0
        self.max_physic_offset = max_phy
        self.mapped_file_queue.truncate_dirty_files(process_offset)
        self.mapped_file_queue.flushed_where = process_offset

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Remove units whose record ends after ``phy_offset`` (the recovered CommitLog end)."""
        mfq = self.mapped_file_queue
        for mf in reversed(mfq.files):
            pos = mf.wrote_position - UNIT
            while pos >= 0:
                offset, size, _ = CQ_UNIT.unpack_from(mf.mv, pos)
                if size != BLANK_UNIT_SIZE and offset + size <= phy_offset:
                    break
                pos -= UNIT
            new_end = mf.file_from_offset + pos + UNIT
            if pos >= 0:
                mfq.truncate_dirty_files(new_end)
                break
            mfq.truncate_dirty_files(mf.file_from_offset)
        self.max_physic_offset = -1
        for mf in reversed(mfq.files):
            pos = mf.wrote_position - UNIT
            while pos >= 0:
                offset, size, _ = CQ_UNIT.unpack_from(mf.mv, pos)
                if size != BLANK_UNIT_SIZE:
                    self.max_physic_offset = offset + size
                    return
                pos -= UNIT

    def correct_min_offset(self, min_phy_offset: int) -> None:
        """Move ``min_logic_offset`` to the first unit whose record is at or after ``min_phy_offset``."""
        files = self.mapped_file_queue.files
        if not files:
            return
        for mf in files:
            lo, hi = 0, mf.wrote_position // UNIT
            if hi == 0:
                continue
            offset, size, _ = CQ_UNIT.unpack_from(mf.mv, (hi - 1) * UNIT)
            if offset < min_phy_offset and size != BLANK_UNIT_SIZE:
                continue
            while lo < hi:
                mid = (lo + hi) // 2
                offset, size, _ = CQ_UNIT.unpack_from(mf.mv, mid * UNIT)
                if size == BLANK_UNIT_SIZE or offset < min_phy_offset:
                    lo = mid + 1
                else:
                    hi = mid
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + lo * UNIT)
            return
        last = files[-1]
        self.min_logic_offset = last.file_from_offset + last.wrote_position

    # ------------------------------------------------------------------ write
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        if offset + size <= self.max_physic_offset:
            return True  # already dispatched (replay)
        expect = cq_offset * UNIT
        mf = self._tail
        if mf is not None and mf.wrote_position < self.mapped_file_size and \
                mf.file_from_offset + mf.wrote_position == expect and mf.available:
            CQ_UNIT.pack_into(mf.mv, mf.wrote_position, offset, size, tags_code)
            mf.wrote_position += UNIT
            self.max_physic_offset = offset + size
            if not self._dirty:
                self._dirty_set.mark(self)
            return True
        done = self._put_slow(offset, size, tags_code, cq_offset, expect)
        if not self._dirty:
            self._dirty_set.mark(self)
        return done

    def put_units(self, units: list[tuple[int, int, int, int]], start: int = 0) -> None:
        """``units[start:]`` in order (``group_units``' ``(offset, size, tags_code, cq_offset)``, the caller having
        skipped what the queue already holds): each run of consecutive units that follows the tail file's last one
        is written in one call (``pack_units``); any other unit goes through :meth:`put_message_position_info`."""
        i, n = start, len(units)
        while i < n:
            mf = self._tail
            phy, size, _, cq_offset = units[i]
            if (mf is not None and mf.available and phy + size > self.max_physic_offset
                    and mf.file_from_offset + mf.wrote_position == cq_offset * UNIT):
                k = pack_units(mf.mv, mf.wrote_position, self.mapped_file_size, units, i, n, cq_offset,
                               self.max_physic_offset)
                if k:
                    mf.wrote_position += k * UNIT
                    last = units[i + k - 1]
                    self.max_physic_offset = last[0] + last[1]
                    if not self._dirty:
                        self._dirty_set.mark(self)
                    i += k
                    continue
            self.put_message_position_info(*units[i])
            i += 1

    def _put_slow(self, offset: int, size: int, tags_code: int, cq_offset: int, expect: int) -> bool:
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file(expect)
        if mf is None:
            return False
        current = mf.file_from_offset + mf.wrote_position
        if mf.first_create_in_queue and mf.wrote_position == 0 and expect > mf.file_from_offset and cq_offset:
            self._fill_pre_blank(mf, expect)
            self.min_logic_offset = expect
            current = expect
        elif expect < current:
            log.warning("ConsumeQueue %s-%d: unit %d already written; skipped", self.topic, self.queue_id, cq_offset)
            return True
        elif expect > current:
            log.error("ConsumeQueue %s-%d: gap before unit %d (queue ends at %d); padding with blank units",
                      self.topic, self.queue_id, cq_offset, current // UNIT)
            while current < expect:
                mf = self._writable(current)
                CQ_UNIT.pack_into(mf.mv, mf.wrote_position, 0, BLANK_UNIT_SIZE, 0)
                mf.wrote_position += UNIT
                current += UNIT
        if mf.wrote_position >= self.mapped_file_size:
            mf = self._writable(expect)
        CQ_UNIT.pack_into(mf.mv, mf.wrote_position, offset, size, tags_code)
        mf.wrote_position += UNIT
        self.max_physic_offset = offset + size
        self._tail = mf
        return True

    def _writable(self, logic_offset: int) -> MappedFile:
        mf = self.mapped_file_queue.get_last_mapped_file(logic_offset)
        assert mf is not None
        return mf

    def _fill_pre_blank(self, mf: MappedFile, until: int) -> None:
        pos = 0
        end = until - mf.file_from_offset
        while pos < end:
            CQ_UNIT.pack_into(mf.mv, pos, 0, BLANK_UNIT_SIZE, 0)
            pos += UNIT
        mf.wrote_position = end

    # ------------------------------------------------------------------ read
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // UNIT

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.max_offset() // UNIT

    def get_index_buffer(self, start_index: int) -> SelectMappedBufferResult | None:
        """Held view of units from ``start_index`` to the end of its file's written units."""
        offset = start_index * UNIT
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select(offset % self.mapped_file_size)

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        offset = index * UNIT
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        raw = mf.read(offset % self.mapped_file_size, UNIT)
        return CQ_UNIT.unpack(raw) if raw is not None else None

    def last_phy_in_file(self, mf: MappedFile) -> int | None:
        if mf.wrote_position < UNIT:
            return None
        offset, size, _ = CQ_UNIT.unpack_from(mf.mv, mf.wrote_position - UNIT)
        return offset if size != BLANK_UNIT_SIZE else None

    # ------------------------------------------------------------------ maintenance
    def flush(self, least_pages: int = 0) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    def unflushed(self) -> bool:
        """Units past the flushed position (what a later :meth:`flush` would still sync)."""
        mfq = self.mapped_file_queue
        last = mfq.last()
        return last is not None and last.file_from_offset + last.wrote_position > mfq.flushed_where

    def delete_expired_files(self, min_phy_offset: int, now_ms: int) -> int:
        deleted = self.mapped_file_queue.delete_expired_file_by_offset(
            min_phy_offset, UNIT, now_ms, self.last_phy_in_file)
        self.correct_min_offset(min_phy_offset)
        return len(deleted)

    def close(self) -> None:
        self._dirty_set.discard(self)
        self.mapped_file_queue.close()

    def destroy(self) -> None:
        self._dirty_set.discard(self)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self._tail = None
        self.mapped_file_queue.destroy()


def remove_empty_topic_dir(topic_dir: Path) -> None:
    """Remove a deleted topic's queue directories that are empty, then the topic's directory if it is."""
    if not topic_dir.is_dir():
        return
    for qdir in topic_dir.iterdir():
        if qdir.is_dir() and not any(qdir.iterdir()):
            qdir.rmdir()
    if not any(topic_dir.iterdir()):
        topic_dir.rmdir()


def load_consume_queues(root: Path, mapped_file_size: int) -> tuple[dict[tuple[str, int], ConsumeQueue],
                                                                    dict[tuple[str, int], str]]:
    """Every ConsumeQueue under ``root`` (``<topic>/<queueId>/``), loaded (other entries are ignored), and the
    queues found damaged at load with the reason."""
    table: dict[tuple[str, int], ConsumeQueue] = {}
    damaged: dict[tuple[str, int], str] = {}
    if not root.is_dir():
        return table, damaged
    for topic_dir in sorted(root.iterdir()):
        if not topic_dir.is_dir():
            continue
        for qdir in sorted(topic_dir.iterdir()):
            if not qdir.name.isdigit():
                continue
            cq = ConsumeQueue(topic_dir.name, int(qdir.name), root, mapped_file_size)
            problem = cq.load()
            if problem:
                damaged[(cq.topic, cq.queue_id)] = problem
            table[(cq.topic, cq.queue_id)] = cq
    return table, damaged


QueueKey = tuple[str, int]
Doomed = Callable[[QueueKey, "ConsumeQueue | None"], bool]  # which queues (and queue offsets without one) to drop


def expired(min_phy_offset: int) -> Doomed:
    """RocketMQ's ``cleanExpiredConsumerQueue`` test: a queue (the delay topic's excepted) whose last unit lies
    below the CommitLog's min offset, i.e. retention deleted all its records."""
    return lambda key, cq: (cq is not None and key[0] != SCHEDULE_TOPIC
                            and 0 <= cq.max_physic_offset <= min_phy_offset)


def split_queues(table: dict[QueueKey, ConsumeQueue], doomed: Doomed) -> tuple[dict[QueueKey, ConsumeQueue],
                                                                              dict[QueueKey, ConsumeQueue]]:
    """(the table without the doomed queues, the doomed queues); the caller holds the table's lock."""
    gone = {k: cq for k, cq in table.items() if doomed(k, cq)}
    return {k: v for k, v in table.items() if k not in gone}, gone


def destroy_queues(gone: dict[QueueKey, ConsumeQueue], commit_log: CommitLog, doomed: Doomed) -> int:
    """Forget the queue offsets of ``gone`` (and of keys ``doomed`` picks without a queue) under the put lock,
    then destroy the queues and their emptied directories; how many."""
    with commit_log.put_lock:
        table = commit_log.topic_queue_table
        for key in [k for k in table if k in gone or doomed(k, None)]:
            del table[key]
    for cq in gone.values():
        cq.destroy()
        remove_empty_topic_dir(cq.mapped_file_queue.store_path.parent)
    return len(gone)
