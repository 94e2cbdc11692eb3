"""CommitLog: every topic's messages appended to one sequence of segments (INVENTORY §6).

Invariants:
1. Records are appended in one global order under ``put_lock``; a record never spans two segments.
   When a record (plus the 8-byte minimum blank) does not fit, the rest of the segment becomes a blank
   record (``size, BLANK_MAGIC``) and the record goes at the start of the next segment.
2. ``topic_queue_table[(topic, queue_id)]`` is the next logical offset of that queue. It advances for
   normal and committed-transaction records only, never for prepared or rolled-back ones.
3. A record's bytes are complete before the segment's wrote position moves past it; readers (the
   dispatcher, pulls) only read below it.
4. Size limits are checked before the lock; a refused message writes nothing.

Crash behaviour: a killed process leaves written records in the page cache; a power loss can lose
records past the last flush. Either way recovery (``recovery.py``) walks records from a safe point,
checks magic, lengths and CRC, truncates at the first bad one and rebuilds the derived queues.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from broker_core.codec.batch_append import append_batch
from broker_core.codec.message import (
    BLANK,
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    HEADER_SIZE,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    OFFSET_STORE_TIMESTAMP,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageRecord,
    decode_record,
    host_to_bytes,
)
from broker_core.codec.message_append import append_messages, native_put_single, py_append_messages
from broker_core.config import StoreConfig
from broker_core.store.allocate import AllocateMappedFileService
from broker_core.store.clock import Clock
from broker_core.store.durability import COMMIT_LOG
from broker_core.store.mapped_file import MappedFile, SelectMappedBufferResult
from broker_core.store.mapped_file_queue import MappedFileQueue
from broker_core.store.message import MessageInner
from broker_core.store.prefault import PrefaultService
from broker_core.store.results import BatchPutResult, PutMessageResult, PutStatus

log = logging.getLogger(__name__)

_NO_QUEUE_ADVANCE = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


class CommitLog:
    def __init__(self, config: StoreConfig, store_host: tuple[str, int], clock: Clock,
                 allocator: AllocateMappedFileService | None) -> None:
        """``store_host``: the broker's (brokerIP1, listenPort), written into every record as STOREHOST."""
        self.config = config
        self.clock = clock
        self.mapped_file_size = config.mapped_file_size_commit_log_bytes
        self.mapped_file_queue = MappedFileQueue(config.commit_log_dir, self.mapped_file_size, allocator, COMMIT_LOG)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.put_lock = threading.Lock()
        self.store_host = host_to_bytes(store_host[0])
        self.store_port = store_host[1]
        self.max_message_size = config.max_message_size_bytes
        self.begin_time_in_lock = 0
        # Hand-off to the dispatcher, in CommitLog order: (phy, size, topic, queue_id, queue_offset,
        # tags_code, store_timestamp, keys, uniq_key, sys_flag). A hint: the dispatcher parses the
        # CommitLog itself when an entry is missing.
        self.pending_dispatch: deque[tuple] = deque()
        # Set after an append while the dispatcher sleeps (``wake_on_append``), so a quiet dispatcher need not
        # poll; a busy one polls every millisecond and batches what arrived meanwhile (a wake per append would
        # cost the event loop a GIL hand-off per message).
        self.appended = threading.Event()
        self.wake_on_append = False
        # Set by a dispatcher driven from an event loop (``ReputMessageService.drive_from``): called after every
        # append instead of waking the dispatcher thread
        self.after_append: Callable[[], None] | None = None
        # True while that dispatcher has a dispatch scheduled on its loop (it clears it when the dispatch starts):
        # an append then need not call the hook
        self.dispatch_armed = False
        # Faults in the pages ahead of the write position on its own thread (prefault.py), started with the first
        # append; only with the store's background services (an allocator), and prefaultAheadBytes > 0
        self.prefault: PrefaultService | None = None
        # told (on the prefault thread) when blocks ahead of the writer cannot be reserved for lack of space: the
        # store then refuses puts (MessageStore marks its disk full) before the writer reaches unreserved holes
        self.on_no_space: Callable[[OSError], None] | None = None
        # commitLogWriteMode=pwrite: appends go through each segment's staging buffer (MappedFile.stage); the
        # prefault thread then reads the pages ahead into the page cache instead (MappedFile.populate)
        self.staged_writes = config.commit_log_write_mode == "pwrite"
        self._prefault_ahead = config.prefault_ahead_bytes if allocator is not None else 0

    # ------------------------------------------------------------------ checks
    def check(self, msg: MessageInner) -> PutMessageResult | None:
        """The limits; a result when the message is refused, else None."""
        tlen = len(msg.topic_bytes)
        if tlen > MAX_TOPIC_BYTES or tlen == 0:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, error=(
                f"topic must be 1..{MAX_TOPIC_BYTES} bytes, got {tlen}"))
        plen = len(msg.properties_bytes)
        if plen > MAX_PROPERTIES_BYTES:
            return PutMessageResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, error=(
                f"properties are {plen} bytes, at most {MAX_PROPERTIES_BYTES}"))
        blen = len(msg.body)
        if blen > self.max_message_size:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, error=(
                f"body is {blen} bytes, maxMessageSize is {self.max_message_size}"))
        total = HEADER_SIZE + 3 + tlen + plen + blen
        if total + END_FILE_MIN_BLANK_LENGTH > self.mapped_file_size:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, error=(
                f"record of {total} bytes does not fit a {self.mapped_file_size}-byte CommitLog segment"))
        if not 0 <= msg.queue_id < 1 << 31:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, error=f"queue id {msg.queue_id} is out of range")
        return None

    # ------------------------------------------------------------------ put
    def put_messages(self, msgs: list[MessageInner]) -> list[PutMessageResult]:
        """Append ``msgs`` in order under one lock hold. Each gets its own result; refused messages
        (limits) get their status and are skipped. Each appended record is also handed to the dispatcher
        (``pending_dispatch``) so it need not parse the bytes back."""
        max_body = self.max_message_size
        results: list[PutMessageResult | None] = [None] * len(msgs)
        pending = self.pending_dispatch
        with self.put_lock:
            now = self.clock.now_ms()
            self.begin_time_in_lock = now
            size = self.mapped_file_size
            table = self.topic_queue_table
            host, port = self.store_host, self.store_port
            mf = self.mapped_file_queue.last()
            if mf is None or mf.is_full():
                mf = self._new_segment()
                if mf is None:
                    self.begin_time_in_lock = 0
                    return [r or PutMessageResult(PutStatus.CREATE_MAPEDFILE_FAILED, error="cannot create segment")
                            for r in results]
            elif self.staged_writes and not mf.staged:
                mf.stage()
            n = len(msgs)
            i = 0
            progress = [mf.wrote_position]
            while i < n:
                pos = start = progress[0]
                try:
                    pos, i = append_messages(mf.wv, pos, size, mf.file_from_offset, msgs, i, n, max_body, now,
                                             host, port, table, pending.append, results, PutStatus.PUT_OK,
                                             PutMessageResult, progress)
                finally:
                    if mf.staged:
                        mf.commit(start, progress[0])
                    mf.wrote_position = progress[0]  # what was written and recorded, also when a field is refused
                if i >= n:
                    break
                msg = msgs[i]
                total = HEADER_SIZE + len(msg.body) + len(msg.tail)
                if msg.limits_error or len(msg.body) > max_body or total + END_FILE_MIN_BLANK_LENGTH > size:
                    results[i] = self.check(msg)
                    i += 1
                elif total + END_FILE_MIN_BLANK_LENGTH > size - pos:
                    self._blank_rest(mf, pos, now)
                    mf = self._new_segment()
                    if mf is None:
                        for j in range(i, n):
                            results[j] = results[j] or PutMessageResult(
                                PutStatus.CREATE_MAPEDFILE_FAILED, error="cannot create the next segment")
                        break
                    progress[0] = mf.wrote_position
                else:  # a field the C loop does not take as is: the pure loop packs it (or raises struct.error)
                    try:
                        _, i = py_append_messages(mf.wv, pos, size, mf.file_from_offset, msgs, i, i + 1, max_body,
                                                  now, host, port, table, pending.append, results, PutStatus.PUT_OK,
                                                  PutMessageResult, progress)
                    finally:
                        if mf.staged:
                            mf.commit(pos, progress[0])
                        mf.wrote_position = progress[0]
            if mf is not None:
                mf.store_timestamp = now
                if self._prefault_ahead:
                    self._prefault(mf)
            self.begin_time_in_lock = 0
        if pending:
            self.notify_append()
        return results  # type: ignore[return-value]  # every slot was filled in the loop above

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        """``put_messages([msg])[0]``: in one C call (``put_single``) when the record goes into the last segment as
        it is, else (or without the C codec) the batch way."""
        if native_put_single is not None:
            result = native_put_single(self, msg, PutStatus.PUT_OK, PutMessageResult)
            if result is not None:
                return result
        return self.put_messages([msg])[0]

    def put_batch(self, topic: str, topic_bytes: bytes, queue_id: int, body: bytes, extra: bytes, sys_flag: int,
                  born_ts: int, born_host: bytes, born_port: int, reconsume: int) -> BatchPutResult:
        """Append a SEND_BATCH_MESSAGE body's entries to one queue under one lock hold, written straight from
        the batch bytes (codec/batch_append.py), rolling segments as needed. The caller checked the batch
        (``check_batch``). Each record is handed to the dispatcher as in :meth:`put_messages`."""
        dispatch: list[tuple] = []
        phys: list[int] = []
        size = self.mapped_file_size
        status, error = PutStatus.PUT_OK, ""
        with self.put_lock:
            now = self.clock.now_ms()
            self.begin_time_in_lock = now
            key = (topic, queue_id)
            first = qoff = self.topic_queue_table.get(key, 0)
            end = len(body)
            body_pos = 0
            mf = self.mapped_file_queue.last()
            try:
                while body_pos < end:
                    if mf is None or mf.is_full():
                        mf = self._new_segment()
                        if mf is None:
                            status, error = PutStatus.CREATE_MAPEDFILE_FAILED, "cannot create the next segment"
                            break
                    elif self.staged_writes and not mf.staged:
                        mf.stage()
                    start = mf.wrote_position
                    pos, body_pos, qoff = append_batch(
                        mf.wv, start, size, mf.file_from_offset, body, body_pos, topic, topic_bytes, queue_id, qoff,
                        extra, sys_flag, born_ts, born_host, born_port, now, self.store_host, self.store_port,
                        reconsume, dispatch, phys)
                    if mf.staged:
                        mf.commit(start, pos)
                    mf.wrote_position = pos
                    mf.store_timestamp = now
                    if body_pos < end:  # the next entry does not fit: blank the rest, go on in a new segment
                        if pos == 0:
                            status, error = PutStatus.MESSAGE_ILLEGAL, "a record does not fit an empty segment"
                            break
                        self._blank_rest(mf, pos, now)
            finally:
                if mf is not None and self._prefault_ahead:
                    self._prefault(mf)
                if qoff != first:
                    self.topic_queue_table[key] = qoff
                self.pending_dispatch.extend(dispatch)
                self.begin_time_in_lock = 0
        if dispatch:
            self.notify_append()
        end_offset = dispatch[-1][0] + dispatch[-1][1] if dispatch else -1
        return BatchPutResult(status, phys, first if phys else -1, end_offset, self.store_host, self.store_port,
                              error)

    def _prefault(self, mf: MappedFile) -> None:
        """After an append to ``mf``: ask the prefault thread for more when the writer nears the end last asked for."""
        pf = self.prefault
        if pf is None:
            pf = self.prefault = PrefaultService(self._prefault_ahead, self.on_no_space).start()
        if pf.stopped:
            self._prefault_ahead = 0  # the platform cannot (or a call failed): stop asking
        elif pf.wanted(mf):
            pf.request(mf)

    def notify_append(self) -> None:
        """Records were appended: tell the dispatcher (its event-loop hook, or its thread if it sleeps)."""
        hook = self.after_append
        if hook is not None:
            if not self.dispatch_armed:
                hook()
        elif self.wake_on_append:
            self.appended.set()

    def _blank_rest(self, mf: MappedFile, pos: int, now: int) -> None:
        """The segment's end from ``pos`` as a blank record (the next record goes into a new segment)."""
        size = self.mapped_file_size
        BLANK.pack_into(mf.wv, pos, size - pos, BLANK_MAGIC_CODE)
        if mf.staged:
            mf.commit(pos, pos + 8)  # the blank's header; the zeros after it are the file's already
        mf.store_timestamp = now
        mf.wrote_position = size
        mf.unstage()

    def _new_segment(self) -> MappedFile | None:
        try:
            mf = self.mapped_file_queue.get_last_mapped_file(0)
        except OSError as exc:
            log.error("cannot create CommitLog segment: %s", exc)
            return None
        if mf is not None and self.staged_writes:
            mf.stage()
        return mf

    def stage_last(self) -> None:
        """After recovery: appends to the last segment go through its staging buffer (``staged_writes``)."""
        mf = self.mapped_file_queue.last()
        if mf is not None and self.staged_writes:
            mf.stage()

    # ------------------------------------------------------------------ reads
    def min_offset(self) -> int:
        """The first readable physical offset (-1 when empty). A first segment being destroyed is skipped."""
        first = self.mapped_file_queue.first()
        if first is None:
            return -1
        if first.available:
            return first.file_from_offset
        return first.file_from_offset + self.mapped_file_size

    def max_offset(self) -> int:
        return self.mapped_file_queue.max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.mapped_file_size - offset % self.mapped_file_size

    def get_data(self, offset: int) -> SelectMappedBufferResult | None:
        """Held view from ``offset`` to the read position of its segment."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select(offset % self.mapped_file_size)

    def get_message_bytes(self, offset: int, size: int) -> bytes | None:
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def select_message_bytes(self, offset: int, size: int) -> SelectMappedBufferResult | None:
        """A held view of ``[offset, offset + size)`` (one segment), without copying; None when it is not
        there. The caller must ``release()`` it (see :meth:`MappedFile.select`)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select(offset - mf.file_from_offset, size)

    def look_message_by_offset(self, offset: int, size: int | None = None) -> MessageRecord | None:
        """Decode the record at ``offset`` (None when there is none there)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if size is None:
            raw = mf.read(pos, 4)
            if raw is None:
                return None
            size = int.from_bytes(raw, "big", signed=True)
        data = mf.read(pos, size) if size > 0 else None
        if data is None:
            return None
        return decode_record(data, 0, source=str(mf.path), base_offset=pos, check_crc=False)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        if size < HEADER_SIZE:
            return -1
        raw = self.get_message_bytes(offset, OFFSET_STORE_TIMESTAMP + 8)
        if raw is None:
            return -1
        return int.from_bytes(raw[OFFSET_STORE_TIMESTAMP:OFFSET_STORE_TIMESTAMP + 8], "big", signed=True)

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        self.mapped_file_queue.load()

    def flush(self, least_pages: int = 0) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    @property
    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    @property
    def flushed_timestamp(self) -> int:
        """Store time of a record known flushed (0: none yet); what the checkpoint records."""
        return self.mapped_file_queue.flushed_timestamp

    def close(self) -> None:
        if self.prefault is not None:
            self.prefault.shutdown()
            self._prefault_ahead = 0
        self.mapped_file_queue.close()
