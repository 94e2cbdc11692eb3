"""Replicated appends: a slave's CommitLog written from its master's bytes (RocketMQ HA, reference §8).

A slave never builds records itself. The HA client hands the store raw CommitLog bytes at the offset the
master took them from, and :func:`append_replicated` copies them into the mapped segments unchanged, so the
slave's CommitLog is byte for byte the master's. The slave's own dispatcher then parses the new records from
its CommitLog (there is no put-path hand-off on a slave) and builds its ConsumeQueues and IndexFiles.

Invariants:
1. Bytes are appended only at the current end of the CommitLog (``max_offset``). An empty store accepts a
   first chunk at any segment boundary (the master starts a fresh slave at the start of its last segment).
   Anything else raises ``ReplicaError`` and writes nothing.
2. A chunk holds whole records only (:func:`split_whole_records` cuts a stream into such chunks), so the
   readable end of the CommitLog, which the dispatcher and pulls read up to, is always a record boundary.
3. A chunk never spans two segments. It may end with the blank record that fills the rest of a segment;
   the blank must then reach exactly the segment's end, so the next chunk starts the next segment at the
   offset the master rolled at.
4. The appender holds ``CommitLog.put_lock``; it is the only writer on a slave (puts are refused there).

5. Segments are sparse (``mapped_file.create_sparse``): the blocks under a chunk are reserved before it is copied
   through the mapping (``MappedFile.reserve``, ``RESERVE_AHEAD`` at a time), so a full disk raises OSError with
   nothing written instead of a SIGBUS.

Crash behaviour: as for puts. Appended bytes are in the page cache, flushed by the store's flush service;
after a crash recovery truncates at the last valid record and the slave reports that offset to the master,
which resends from there. A chunk is copied so that a SIGKILL in the middle never leaves a record recovery would
take for whole (:func:`copy_chunk`): recovery checks a record's lengths and its body's CRC, not its topic or
properties, so a copy cut inside a record's properties used to leave a record that recovered as valid with zeros in
them, and the slave's CommitLog then differed from its master's there (seen once in a clean-clone CI run of
``test_ha_replication``, a slave SIGKILLed mid-stream).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.codec.message import (
    BLANK_MAGIC_CODE,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    OFFSET_STORE_TIMESTAMP,
)
from broker_core.store.errors import StoreError

if TYPE_CHECKING:
    from broker_core.store.commit_log import CommitLog

log = logging.getLogger(__name__)


# Blocks reserved past a copied chunk (one posix_fallocate per this much replicated), as the master's prefault window
RESERVE_AHEAD = 4 * 1024 * 1024


class ReplicaError(StoreError):
    """Replicated bytes that cannot be appended (wrong offset, not whole records, across a segment end)."""


def split_whole_records(data: bytes | bytearray | memoryview, start: int, segment_size: int) -> int:
    """How many leading bytes of ``data`` (CommitLog bytes from global offset ``start``) form whole records of
    one segment, a blank record counting as whole only when all of it (to the segment's end) is there; the
    count stops after a blank (call again for the next segment's records). Raises
    ``ReplicaError`` for bytes that are not a record (a bad magic or size)."""
    mv = memoryview(data)
    n = len(mv)
    pos = 0
    while pos + 8 <= n:
        size = int.from_bytes(mv[pos:pos + 4], "big", signed=True)
        magic = int.from_bytes(mv[pos + 4:pos + 8], "big")
        at = start + pos
        if magic == BLANK_MAGIC_CODE:
            rest = segment_size - at % segment_size
            if size != rest:
                raise ReplicaError(f"blank record at {at} is {size} bytes but the segment has {rest} left")
        elif magic != MESSAGE_MAGIC_CODE or size < HEADER_SIZE or at % segment_size + size > segment_size:
            raise ReplicaError(f"no record at CommitLog offset {at} (size {size}, magic {magic:#x})")
        if pos + size > n:
            break
        pos += size
        if magic == BLANK_MAGIC_CODE:
            break  # the segment ends here: one call never covers two segments
    return pos


def append_replicated(commit_log: CommitLog, phy_offset: int, data: bytes | memoryview) -> int:
    """Append ``data`` (whole records, invariant 2) at ``phy_offset``; returns the new CommitLog end."""
    size = commit_log.mapped_file_size
    if not data:
        return commit_log.max_offset()
    if split_whole_records(data, phy_offset, size) != len(data):
        raise ReplicaError(f"replicated chunk at {phy_offset} ({len(data)} bytes) does not end on a record")
    if phy_offset % size + len(data) > size:
        raise ReplicaError(f"replicated chunk at {phy_offset} ({len(data)} bytes) crosses a segment end")
    queue = commit_log.mapped_file_queue
    with commit_log.put_lock:
        last = queue.last()
        if last is None:
            if phy_offset % size:
                raise ReplicaError(f"an empty CommitLog starts at a segment boundary, not at {phy_offset}")
            mf = queue.get_last_mapped_file(phy_offset)
        else:
            end = queue.max_offset()
            if phy_offset != end:
                raise ReplicaError(f"replicated chunk at {phy_offset}, but this CommitLog ends at {end}")
            mf = queue.get_last_mapped_file(0)
        if mf is None or mf.file_from_offset != phy_offset - phy_offset % size:
            raise ReplicaError(f"no CommitLog segment for offset {phy_offset}")
        pos = phy_offset - mf.file_from_offset
        if pos + len(data) > mf.reserved:  # segments are sparse: blocks first, so a full disk is ENOSPC, no SIGBUS
            mf.reserve(pos + len(data) + RESERVE_AHEAD)
        copy_chunk(mf.mv, pos, data, size)
        stamp = _last_store_timestamp(data, phy_offset, size)
        if stamp:
            mf.store_timestamp = stamp
        mf.wrote_position = pos + len(data)  # after the bytes: readers only read below it
    commit_log.notify_append()
    return phy_offset + len(data)


_ZERO_SIZE = bytes(4)


def copy_chunk(mv: memoryview | bytearray, pos: int, data: bytes | memoryview, segment_size: int) -> None:
    """``mv[pos:pos + len(data)] = data``, in an order that leaves recovery nothing torn to find if the process is
    killed at any point of it (the store's page-cache bytes are what a SIGKILL leaves; a copy may be cut anywhere
    and, within one ``memcpy``, not in address order). Recovery reads records from ``pos`` by their TOTALSIZE:
    1. the size word at ``pos`` and the one right after the chunk are zeroed first (bytes there may be a stale
       partial copy of the same records, left by an earlier attempt that was killed), so a cut copy reads as the end
       of data at ``pos`` and a finished one ends at the chunk's end;
    2. the chunk's bytes after its first size word;
    3. that size word last (one aligned 4-byte store), which makes the whole chunk readable at once."""
    end = pos + len(data)
    mv[pos:pos + 4] = _ZERO_SIZE
    if end + 4 <= segment_size:
        mv[end:end + 4] = _ZERO_SIZE
    with memoryview(data) as view:
        mv[pos + 4:end] = view[4:]
        mv[pos:pos + 4] = view[:4]


def _last_store_timestamp(data: bytes | memoryview, start: int, segment_size: int) -> int:
    """STORETIMESTAMP of the last message record in ``data`` (0 when it holds none): the time the flush
    checkpoint records for it, as on the master."""
    mv = memoryview(data)
    pos, last = 0, -1
    while pos + 8 <= len(mv):
        size = int.from_bytes(mv[pos:pos + 4], "big", signed=True)
        if int.from_bytes(mv[pos + 4:pos + 8], "big") != MESSAGE_MAGIC_CODE:
            break
        last = pos
        pos += size
    if last < 0:
        return 0
    at = last + OFFSET_STORE_TIMESTAMP
    return int.from_bytes(mv[at:at + 8], "big", signed=True)


class ReplicationMixin:
    """The replication part of ``MessageStore``'s API (kept here so the facade stays small)."""

    if TYPE_CHECKING:
        from broker_core.config import BrokerConfig
        from broker_core.store.dispatcher import ReputMessageService
        from broker_core.store.schedule import ScheduleMessageService

        commit_log: CommitLog
        config: BrokerConfig
        reput: ReputMessageService
        schedule: ScheduleMessageService
        _writable_role: bool

    def max_phy_offset(self) -> int:
        """The CommitLog's end: what a slave reports to its master, and where the master's data ends."""
        return self.commit_log.max_offset()

    def append_replicated(self, phy_offset: int, data: bytes | memoryview) -> int:
        """A slave's append of its master's CommitLog bytes (see :func:`append_replicated`); returns the new end.
        Raises ``ReplicaError`` (nothing written) when the bytes do not continue this CommitLog."""
        return append_replicated(self.commit_log, phy_offset, data)

    def get_commit_log_data(self, phy_offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` CommitLog bytes from ``phy_offset``, never past the end of its segment's written
        part (RocketMQ's ``getCommitLogData``): what a master sends a slave. None when nothing is there yet."""
        result = self.commit_log.get_data(phy_offset)
        if result is None:
            return None
        try:
            return bytes(result.buffer[:max_bytes]) if result.size else None
        finally:
            result.release()

    def set_dispatch_limit(self, limit: Callable[[], int] | None) -> None:
        """Controller mode (RocketMQ's ``readUnCommitted=false``): dispatch records to the ConsumeQueues only below
        ``limit()`` (the confirm offset); None lifts it. ``dispatch_more`` after the limit rose."""
        self.reput.dispatch_limit = limit

    def dispatch_more(self) -> None:
        """The dispatch limit rose: dispatch what is now below it (soon, on the dispatcher's loop or thread)."""
        self.reput.kick()

    def min_phy_offset(self) -> int:
        """The CommitLog's first readable offset (-1 when empty): where expired files end."""
        return self.commit_log.min_offset()

    def truncate_files(self, point: int) -> bool:
        """Controller mode: cut the CommitLog, ConsumeQueues and index back to ``point`` (store/truncate.py);
        False (nothing changed) when ``point`` is not a message boundary."""
        from broker_core.store.truncate import truncate_files

        return truncate_files(self, point)  # type: ignore[arg-type]  # self is the MessageStore

    def set_writable(self, writable: bool) -> None:
        """Controller mode: open or close the store for puts (a fenced broker or a slave refuses them with
        SERVICE_NOT_AVAILABLE, on every path: remoting, the send lane, gRPC, delayed delivery)."""
        self._writable_role = writable

    @property
    def writable(self) -> bool:
        return self._writable_role

    def open_as_master(self) -> None:
        """Controller mode, a new master (§4.2 step 4): dispatch everything the CommitLog holds, take each queue's
        next offset from its ConsumeQueue, then accept puts."""
        from broker_core.store import recovery

        self.reput.do_reput()
        with self.commit_log.put_lock:
            recovery.recover_topic_queue_table(self)  # type: ignore[arg-type]  # self is the MessageStore
        self._writable_role = True

    def set_delay_offsets(self, offsets: dict[int, int]) -> None:
        """A slave's copy of its master's delay-level progress (``delayOffset.json``), persisted at shutdown."""
        self.schedule.offsets.update(offsets)

    def promote(self, role: str) -> None:
        """Make a slave's store writable as ``role`` (ASYNC_MASTER or SYNC_MASTER): everything replicated is
        dispatched first, then each queue's next offset is taken from its ConsumeQueue, as after recovery."""
        from broker_core.store import recovery

        self.reput.do_reput()
        with self.commit_log.put_lock:
            recovery.recover_topic_queue_table(self)  # type: ignore[arg-type]  # self is the MessageStore
        self.config.broker_role = role
        self._writable_role = True
