"""MappedFile: one fixed-size, memory-mapped segment file (INVENTORY §3).

Invariants:
1. The file name is the 20-digit zero-padded global offset of its first byte (``file_from_offset``).
2. ``flushed_position <= wrote_position <= file_size``. Bytes below ``wrote_position`` are complete
   records or units; readers never read at or past it (it is the published read position; there is
   no TransientStorePool, so the committed position equals the wrote position).
3. Only one thread appends (the owner holds a lock); ``wrote_position`` is advanced after the bytes are
   in place, so a reader that sees the new position sees the bytes.
4. The file is created sparse (``ftruncate`` to its size, as RocketMQ's ``setLength``): it costs the disk only
   the pages written (``st_blocks``), so a ConsumeQueue with one unit holds one block and a fresh segment none.
   A hole reads as zeros, exactly as the unwritten tail did when files were allocated whole. Blocks are taken
   when a page is first written, so on a full disk a write can fail: a ``pwrite`` (staged appends) answers
   ENOSPC and :meth:`commit` reserves the range (``posix_fallocate``) before its fallback copy, raising if it
   cannot; a store through the mapping into a hole cannot fail softly (SIGBUS), which the prefault thread makes
   rare for the CommitLog by reserving its window ahead of the writer (:meth:`reserve`) and the disk guard
   prevents by refusing puts past ``diskSpaceWarningLevelRatio`` (90%). ``warmMapedFileEnable`` writes a
   CommitLog segment whole with zeros (:meth:`warm`), as upstream.
5. ``hold()``/``release()`` count readers. ``destroy()`` unmaps and deletes the file only when no reader
   holds it, or after ``interval_forcibly_ms`` (then the file is unlinked and the mapping is dropped
   once the last reader lets go: Python cannot unmap a buffer that is still exported).

6. ``flushed_timestamp`` is the store time of a record at or below ``flushed_position``, taken before the
   position it goes with (so it never names a record that was not flushed): what the checkpoint records.
7. A failed sync raises and leaves ``flushed_position`` where it was (``durability.py``).

Crash behaviour: data written into the mapping is in the page cache and survives a killed process;
only ``flush()`` (``msync(MS_SYNC)`` of the written range, the GIL released) makes it survive power loss.
A file being created is written under a ``.tmp`` name, renamed when its size is final, and its directory
is fsynced, so a segment that was flushed cannot lose its name in a power loss.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

from broker_core.store.durability import OTHER, datasync, sync_mapped
from broker_core.store.errors import StoreError
from broker_core.store.pages import give_back, populate_write, read_in, staging_buffer
from broker_core.store.select_result import SelectMappedBufferResult as SelectMappedBufferResult
from broker_core.store.sparse import allocated_bytes as allocated_bytes
from broker_core.store.sparse import create_sparse

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
STAGE_RELEASE = 4 * 1024 * 1024  # staged bytes given back to the kernel at a time (a multiple of 2 MiB)
_WARM_CHUNK = 1024 * 1024
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk (or quota): what a store into a hole would meet as SIGBUS


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


class MappedFile:
    def __init__(self, path: str | os.PathLike[str], file_size: int, *, create: bool = False) -> None:
        self.path = Path(path)
        self.file_size = file_size
        try:
            self.file_from_offset = int(self.path.name)
        except ValueError:
            raise StoreError(f"segment file name is not a 20-digit offset: {self.path}") from None
        if create:
            create_sparse(self.path, file_size)
        self.fd = os.open(self.path, os.O_RDWR)  # also what staged appends are written through (commit)
        try:
            actual = os.fstat(self.fd).st_size
            if actual != file_size:
                raise StoreError(f"segment {self.path} is {actual} bytes, expected {file_size}")
            self.mm = mmap.mmap(self.fd, file_size)
        except BaseException:
            os.close(self.fd)
            raise
        self.mv = memoryview(self.mm)
        self.wv = self.mv  # where appends are written: the mapping, or the staging buffer (stage)
        self.staged = False
        self.unstageable = False  # staging failed on this segment (no buffer, a failed pwrite): it stays unstaged
        self.released = 0  # staging below this was given back to the kernel (commit)
        self._stage: mmap.mmap | None = None
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.flushed_timestamp = 0
        self.populated = 0  # [0, populated) was faulted in for writing (populate; prefault.py)
        self.reserved = 0  # [0, reserved) is known to have its blocks (reserve); 0 for a file opened, not created
        self.prefault_end = 0  # the end the prefault thread was last asked to reach (prefault.py)
        self.read_ahead_end = 0  # [.., read_ahead_end) was advised WILLNEED for a cold read (readahead.py)
        self.first_create_in_queue = False
        self._lock = threading.Lock()
        self._ref_count = 1
        self._available = True
        self._cleanup_over = False
        self._first_shutdown_ms = 0

    # ------------------------------------------------------------------ positions
    @property
    def read_position(self) -> int:
        return self.wrote_position

    @property
    def committed_position(self) -> int:
        return self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def available(self) -> bool:
        return self._available

    def set_positions(self, pos: int) -> None:
        """Recovery and truncation: every position becomes ``pos``."""
        self.wrote_position = pos
        self.flushed_position = pos

    def last_modified_ms(self) -> int:
        return int(os.stat(self.path).st_mtime * 1000)

    # ------------------------------------------------------------------ writes
    def append_bytes(self, data: bytes) -> bool:
        """Raw append (ConsumeQueue units). False when it does not fit."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        self.mv[pos:end] = data
        self.wrote_position = end
        return True

    def warm(self) -> None:
        """Pre-fault a new, empty segment (upstream ``warmMappedFile``, only with ``warmMapedFileEnable=true``):
        write zeros through the descriptor and ``fdatasync`` them, so the page cache holds every page clean, every
        block is allocated (the whole segment on disk) and the append path takes only cheap minor faults.
        ``os.pwrite``/``fdatasync`` release the GIL, so this runs beside the writer (``madvise(MADV_POPULATE_*)``
        holds the GIL for the whole call). Only for files with no data."""
        zeros = bytes(_WARM_CHUNK)
        for start in range(0, self.file_size, _WARM_CHUNK):
            os.pwrite(self.fd, zeros[: min(_WARM_CHUNK, self.file_size - start)], start)
        datasync(self.fd)

    def reserve(self, end: int) -> None:
        """Give ``[reserved, end)`` its blocks (``posix_fallocate``: unwritten extents, reading as zeros; no byte
        changes), so that later writes there cannot meet a full disk. The prefault thread reserves its window ahead
        of the CommitLog's writer; a file opened rather than created starts from 0 (reserving what is allocated
        already costs a lookup). OSError (ENOSPC) propagates; ``reserved`` then stays where it was."""
        end = min(end, self.file_size)
        start = self.reserved
        if end <= start or not self.hold():
            return
        try:
            os.posix_fallocate(self.fd, start, end - start)
            if end > self.reserved:
                self.reserved = end
        finally:
            self.release()

    def advise(self, advice: int) -> None:
        """``madvise`` the whole mapping (``mmap.MADV_*``); a file being destroyed is left alone, and a platform
        without the call or the advice changes nothing (advice changes no byte, only how pages are brought in)."""
        if not self.hold():
            return
        try:
            self.mm.madvise(advice)
        except (AttributeError, OSError, ValueError):
            pass
        finally:
            self.release()

    def populate(self, upto: int, chunk: int, stop: Callable[[], bool], gap: int = 0) -> bool:
        """Fault in ``[populated, upto)`` for writing (``pages.populate_write``; for a staged segment, whose pages
        ``pwrite`` fills, ``pages.read_in`` puts them in the page cache instead; ``chunk`` bytes a call, each
        releasing the GIL), starting no lower than the page ``gap`` bytes past the write position (pages the writer
        is about to touch are left to it: it would wait for them) and advancing ``populated`` after each call,
        until ``stop()``; ``populated`` then reaches ``upto`` (nothing more to ask for below it). No byte changes.
        False when the platform cannot (nothing done); a file being destroyed is left alone; OSError from the
        kernel propagates."""
        if not self.hold():
            return True
        try:
            wrote = self.wrote_position + gap
            at = max(self.populated, wrote - wrote % OS_PAGE_SIZE)
            while at < upto and not stop():
                n = min(chunk, upto - at)
                if not (read_in(self.fd, at, n) if self.staged else populate_write(self.mm, at, n)):
                    return False
                at += n
                self.populated = at
            if at >= upto > self.populated:  # all of it lies within the gap: the writer takes those pages
                self.populated = upto
            return True
        finally:
            self.release()

    # ------------------------------------------------------------------ staged appends
    def stage(self) -> None:
        """Appends from now on go into an anonymous buffer laid out as the file (``wv``), then into the file by
        ``pwrite`` (:meth:`commit`) before the write position passes them; the mapping is only read. A page written
        through a shared mapping is cleaned at each write-back with a TLB shootdown of every CPU running the process
        (20 us an IPI on this VM, one per 4 KiB flushed) and faults again. Never for a full segment; readers never
        see the buffer, which goes when the segment fills or closes."""
        if self.staged or self.unstageable or self.is_full() or not self._available:
            return
        try:
            self._stage = staging_buffer(self.file_size)
        except OSError as exc:  # e.g. strict overcommit: appends go through the mapping, as unstaged
            log.warning("no staging buffer for %s (%s): appends go through the mapping", self.path, exc)
            self.unstageable = True
            return
        self.released = self.wrote_position - self.wrote_position % STAGE_RELEASE
        self.wv = memoryview(self._stage)
        self.staged = True

    def commit(self, start: int, end: int) -> None:
        """``[start, end)`` of the staging buffer into the file (``pwrite``), then staging below ``end`` back to the
        kernel in ``STAGE_RELEASE`` steps (all of it once the segment is full); the C put path does the same and
        calls this when its ``pwrite`` fails. A failed ``pwrite`` (not expected: the blocks are allocated) is logged,
        the bytes are copied through the mapping instead and the segment is unstaged. Callers publish no position
        before it returns."""
        wv = self.wv
        try:
            while start < end:
                start += os.pwrite(self.fd, wv[start:end], start)
        except OSError as exc:  # the bytes go through the mapping instead (as unstaged), and so do later appends
            log.error("pwrite into %s failed (%s): appends go through the mapping from now on", self.path, exc)
            # the file is sparse: a store into a hole on a full disk is a SIGBUS, so the blocks are taken first
            # (ENOSPC raises here, the bytes not copied and no position published)
            self._reserve_for_copy(start, end)
            self.mv[start:end] = wv[start:end]
            self.unstage(for_good=True)
            return
        if end >= self.file_size or end - self.released >= STAGE_RELEASE:
            self.release_staged(end)

    def _reserve_for_copy(self, start: int, end: int) -> None:
        """The blocks of ``[start, end)`` before a copy through the mapping: ENOSPC (or EDQUOT) raises, nothing
        copied; a file system or descriptor that cannot ``fallocate`` (EOPNOTSUPP, EBADF, ...) is logged and the copy
        goes on."""
        try:
            os.posix_fallocate(self.fd, start, end - start)
        except OSError as exc:
            if exc.errno in NO_SPACE:
                raise
            log.warning("cannot reserve [%d, %d) of %s (%s); copying through the mapping", start, end, self.path, exc)

    def release_staged(self, end: int) -> None:
        """Staging below ``end`` (whole ``STAGE_RELEASE`` steps) back to the kernel; the buffer dropped at the end."""
        stage = self._stage
        if stage is None or end >= self.file_size:
            self.unstage()
            return
        upto = end - end % STAGE_RELEASE
        if upto > self.released:
            give_back(stage, self.released, upto - self.released)
            self.released = upto

    def unstage(self, for_good: bool = False) -> None:
        """Appends go through the mapping again (a full or closing segment; ``for_good``: never staged again)."""
        self.unstageable = self.unstageable or for_good
        if self._stage is None:
            return
        wv, stage = self.wv, self._stage
        self.wv, self.staged, self._stage = self.mv, False, None
        try:
            wv.release()
            stage.close()
        except BufferError:  # a writer's view is still out: the buffer goes when it is collected
            pass

    # ------------------------------------------------------------------ flush
    def is_able_to_flush(self, least_pages: int) -> bool:
        flush = self.flushed_position
        write = self.wrote_position
        if write <= flush:
            return False
        if write >= self.file_size:
            return True
        if least_pages > 0:
            return (write // OS_PAGE_SIZE - flush // OS_PAGE_SIZE) >= least_pages
        return True

    def flush(self, least_pages: int = 0, what: str = OTHER) -> int:
        """Sync ``[0, wrote)`` (``durability.sync_mapped``) when at least ``least_pages`` pages are dirty (0 = any).
        From 0, not from the flushed position: after a restart the pages a killed process wrote below the recovered
        position may still be dirty (the kernel finds the dirty pages of a range by tag, so the clean ones cost
        nothing). Never past the write position: prefaulted zeros there stay dirty. Returns the flushed position;
        raises ``OSError`` (positions unchanged) when the sync fails."""
        if self.is_able_to_flush(least_pages):
            if self.hold():
                try:
                    stamp = self.store_timestamp  # before the position: it names a record below it
                    value = self.wrote_position
                    sync_mapped(self.mm, 0, value, what)
                    self.flushed_position = value
                    self.flushed_timestamp = stamp
                finally:
                    self.release()
            else:
                self.flushed_position = self.wrote_position
        return self.flushed_position

    # ------------------------------------------------------------------ reads
    def select(self, pos: int, size: int | None = None) -> SelectMappedBufferResult | None:
        """A held view of ``[pos, pos+size)`` (or up to the read position). None when out of range or the
        file is being destroyed. The caller must ``release()`` the result."""
        read_pos = self.wrote_position
        if pos < 0 or pos >= read_pos:
            return None
        end = read_pos if size is None else pos + size
        if end > read_pos:
            return None
        if not self.hold():
            return None
        return SelectMappedBufferResult(self.file_from_offset + pos, self.mv[pos:end], self)

    def read(self, pos: int, size: int) -> bytes | None:
        """A copy of ``[pos, pos+size)`` if it lies below the read position."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position:
            return None
        if not self.hold():
            return None
        try:
            return self.mv[pos:pos + size].tobytes()
        finally:
            self.release()

    # ------------------------------------------------------------------ reference counting
    def hold(self) -> bool:
        with self._lock:
            if self._available and self._ref_count > 0:
                self._ref_count += 1
                return True
            return False

    def release(self) -> None:
        with self._lock:
            self._ref_count -= 1
            if self._ref_count > 0:
                return
            self._cleanup_over = self._cleanup()

    def _cleanup(self) -> bool:
        if self._available:
            return False
        if self._cleanup_over:
            return True
        self.unstage()
        try:
            self.mv.release()
            self.mm.close()
        except BufferError:
            # A reader still has a view; the mapping goes when it is garbage collected.
            log.warning("segment %s is still exported by a reader; dropping the mapping late", self.path)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        return True

    def shutdown(self, interval_forcibly_ms: int, now_ms: int) -> None:
        if self._available:
            self._available = False
            self._first_shutdown_ms = now_ms
            self.release()
        elif self._ref_count > 0 and now_ms - self._first_shutdown_ms >= interval_forcibly_ms:
            with self._lock:
                self._ref_count = -1000 - self._ref_count
            self.release()

    def is_cleanup_over(self) -> bool:
        return self._ref_count <= 0 and self._cleanup_over

    def destroy(self, interval_forcibly_ms: int, now_ms: int) -> bool:
        """Unmap and delete. False while readers still hold the file (retry later)."""
        self.shutdown(interval_forcibly_ms, now_ms)
        if not self.is_cleanup_over():
            log.warning("segment %s is held by %d readers; destroy postponed", self.path, self._ref_count)
            return False
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        log.info("deleted segment %s", self.path)
        return True

    def close(self) -> None:
        """Unmap without deleting (store shutdown)."""
        if self._available:
            self._available = False
            self.release()

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
