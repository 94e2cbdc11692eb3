"""IndexFile and IndexService: the hash index from ``topic#key`` to CommitLog offsets (INVENTORY §10).

Invariants:
1. Entry 0 is never used; ``index_count`` starts at 1 and a slot value of 0 means "empty chain".
2. A slot holds the newest entry of its chain; each entry's ``prevIndex`` points to the next older one,
   so a lookup walks newest to oldest.
3. Files are filled in CommitLog order; ``end_phy_offset`` is the last indexed record, so a record at or
   below it is already indexed (replay after a crash is skipped).
4. The header is rewritten after each dispatched batch and before every flush; it may lag the entries
   by one batch, so opening a file walks entries past the header's count (entries are never zero) to
   find the true end.
5. A file is full after ``max_index_num - 1`` entries; the service then starts a new file named by the
   creation time (``yyyyMMddHHmmssSSS``).
6. A file is created sparse (``mapped_file.create_sparse``): only the header's page, the slot pages a key
   hashed to and the entry pages written take disk (a default file is 420 MB long); a hole reads as an empty
   slot or entry, as the allocated zeros did.

Crash behaviour: after an abnormal exit, files whose ``end_timestamp`` is newer than the checkpoint's
index timestamp are deleted and rebuilt by replaying the CommitLog. A file that cannot be opened or fails
:func:`damage` is deleted (ERROR log) and rebuilt the same way, whatever the exit; ``rebuild.py`` also
rebuilds entries that no file holds (a deleted file). Lookups verify every hit against
the record itself, so a hash collision or a stale entry never returns a wrong message.
"""

from __future__ import annotations

import datetime as dt
import logging
import mmap
import os
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

from broker_core.codec import CodecError
from broker_core.codec.hashing import index_key, index_key_hash
from broker_core.codec.index_file import (
    HASH_SLOT,
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INVALID_INDEX,
    decode_header,
    index_entries,
    index_file_size,
    put_entries,
)
from broker_core.store.durability import datasync
from broker_core.store.errors import StoreError
from broker_core.store.sparse import create_sparse

log = logging.getLogger(__name__)



class IndexFile:
    def __init__(self, path: Path, hash_slot_num: int, index_num: int, *, create: bool = False) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        if create:
            create_sparse(path, self.file_size)
        self._fd = os.open(path, os.O_RDWR)
        actual = os.fstat(self._fd).st_size
        if actual != self.file_size:
            os.close(self._fd)
            raise StoreError(f"IndexFile {path} is {actual} bytes, expected {self.file_size}")
        self.mm = mmap.mmap(self._fd, self.file_size)
        self.mv = memoryview(self.mm)
        self.flush_error: OSError | None = None
        # a file created, then a crash before its header was written, is all zeros: it holds nothing yet
        fresh = create or not any(self.mv[:INDEX_HEADER_SIZE])
        if fresh:
            if not create:
                log.warning("IndexFile %s has no header (a crash right after it was created): starting it empty",
                            path.name)
            self.begin_timestamp = self.end_timestamp = 0
            self.begin_phy_offset = self.end_phy_offset = 0
            self.hash_slot_count = 0
            self.index_count = 1
            self._write_header()
        else:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, self.index_count) = decode_header(self.mv, str(path))
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * 4
        if not fresh:
            self._recover_tail()

    def _recover_tail(self) -> None:
        """Count entries written after the header was last updated (a crash between the two)."""
        count = self.index_count
        moved = False
        while count < self.index_num:
            h, phy, time_diff, _ = INDEX_ENTRY.unpack_from(self.mv, self._entries_base + count * INDEX_ENTRY_SIZE)
            if h == 0 and phy == 0 and time_diff == 0:
                break
            if count <= 1:
                self.begin_phy_offset = phy
            self.end_phy_offset = phy
            self.end_timestamp = self.begin_timestamp + time_diff * 1000
            count += 1
            moved = True
        if moved:
            log.info("IndexFile %s: %d entries past the header recovered", self.path.name, count - self.index_count)
            self.index_count = count  # hash_slot_count (informational) may stay a little low
            self._write_header()

    def write_header(self) -> None:
        self._write_header()

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self.mv, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                               self.end_phy_offset, self.hash_slot_count, self.index_count)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry at the head of ``key_hash``'s chain. False when the file is full."""
        return self.put_keys([(key_hash, phy_offset, store_timestamp)], 0) == 1

    def put_keys(self, entries: list[tuple[int, int, int]], start: int) -> int:
        """Add ``entries[start:]`` (``(key_hash, phy_offset, store_timestamp)``) until the file is full
        (upstream ``putKey`` in a loop). Returns the index of the first entry not written."""
        i, self.index_count, self.hash_slot_count, self.begin_timestamp, self.begin_phy_offset = put_entries(
            self.mv, self.hash_slot_num, self.index_num, self.index_count, self.hash_slot_count,
            self.begin_timestamp, self.begin_phy_offset, entries, start)
        if i > start:
            self.end_phy_offset, self.end_timestamp = entries[i - 1][1], entries[i - 1][2]
        return i

    def is_time_matched(self, begin: int, end: int) -> bool:
        return (begin <= self.begin_timestamp <= end) or (begin <= self.end_timestamp <= end) or (
            self.begin_timestamp <= begin and end <= self.end_timestamp)

    def select_phy_offsets(self, key_hash: int, max_num: int, begin: int, end: int) -> list[int]:
        """Offsets of entries with ``key_hash`` stored within ``[begin, end]`` ms, newest first."""
        out: list[int] = []
        mv = self.mv
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * 4
        (cur,) = HASH_SLOT.unpack_from(mv, slot_pos)
        count = self.index_count
        seen = 0
        while INVALID_INDEX < cur < count and len(out) < max_num and seen < count:
            seen += 1
            h, phy, time_diff, prev = INDEX_ENTRY.unpack_from(mv, self._entries_base + cur * INDEX_ENTRY_SIZE)
            ts = self.begin_timestamp + time_diff * 1000
            if h == key_hash and begin <= ts + 999 and ts <= end:
                out.append(phy)
            if prev <= INVALID_INDEX or prev >= cur:
                break
            cur = prev
        return out

    def flush(self) -> None:
        """Header, then ``fdatasync``. A failure raises, now and on every later call (``durability.py``)."""
        if self.flush_error is not None:
            raise OSError(self.flush_error.errno, f"an earlier flush failed: {self.flush_error.strerror}")
        self._write_header()
        try:
            datasync(self._fd)
        except OSError as exc:
            self.flush_error = exc
            raise

    def close(self) -> None:
        try:
            self.mv.release()
            self.mm.close()
        except BufferError:
            log.warning("IndexFile %s still exported at close", self.path)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def damage(f: IndexFile) -> str:
    """A cheap structural check of an opened file: its header against its size and its first and last entries
    (``""`` when it passes). Damage it cannot see only costs misses, never wrong hits: every lookup hit is checked
    against the record itself."""
    if f.index_count > f.index_num or f.hash_slot_count > f.hash_slot_num:
        return f"counts past the file's capacity (index count {f.index_count}, slots used {f.hash_slot_count})"
    if f.index_count <= 1:
        return ""
    if f.begin_timestamp <= 0 or f.end_timestamp < f.begin_timestamp or f.begin_phy_offset < 0 \
            or f.end_phy_offset < f.begin_phy_offset:
        return "header times or offsets out of order"
    base = f._entries_base
    for n, want in ((1, f.begin_phy_offset), (f.index_count - 1, f.end_phy_offset)):
        _, phy, time_diff, prev = INDEX_ENTRY.unpack_from(f.mv, base + n * INDEX_ENTRY_SIZE)
        if phy != want or time_diff < 0 or not 0 <= prev < n:
            return f"entry {n} does not match the header"
    return ""


class IndexService:
    def __init__(self, root: Path, hash_slot_num: int, index_num: int, now_ms: Callable[[], int]) -> None:
        self.root = root
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.now_ms = now_ms
        self.files: list[IndexFile] = []
        self.last_indexed_phy = -1
        self._lock = threading.Lock()

    def load(self, last_exit_ok: bool, checkpoint_index_ts: int,
             keys_at: Callable[[int], list[str] | None] | None = None) -> int | None:
        """Open the files; after an abnormal exit drop those newer than the checkpoint; drop files that cannot be
        read or fail :func:`damage` (ERROR log: derived data), and files whose keys were hashed by this product's
        earlier crc32 scheme (see :meth:`_legacy_hash`; ``keys_at`` gives the ``topic#key`` strings of the record
        at a CommitLog offset). Returns the CommitLog offset from which dropped entries must be rebuilt (None when
        nothing was dropped; 0 when a dropped file's range is unknown: the CommitLog's start)."""
        rebuild_from = None
        if not self.root.is_dir():
            return None
        for tmp in self.root.glob("*.tmp"):
            tmp.unlink()
        prev_end = 0  # where the entries of the previous good file end (a dropped unreadable file starts there)
        for path in sorted(p for p in self.root.iterdir() if p.is_file()):
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num)
                problem = damage(f)
            except (StoreError, CodecError) as exc:
                log.error("IndexFile %s cannot be opened (%s); deleting it and rebuilding its entries from the "
                          "CommitLog", path.name, exc)
                path.unlink()
                rebuild_from = prev_end if rebuild_from is None else min(rebuild_from, prev_end)
                continue
            newer = not last_exit_ok and f.end_timestamp > checkpoint_index_ts
            legacy = not newer and not problem and keys_at is not None and self._legacy_hash(f, keys_at)
            if newer or legacy or problem:
                if problem:
                    log.error("IndexFile %s is damaged (%s); deleting it and rebuilding its entries from the "
                              "CommitLog", path.name, problem)
                else:
                    log.info("IndexFile %s: %s; rebuilding it from the CommitLog", path.name,
                             "newer than the checkpoint after an abnormal exit" if newer
                             else "keys hashed with crc32 by an earlier version")
                begin = prev_end if problem else (f.begin_phy_offset if f.index_count > 1 else None)
                f.destroy()
                if begin is not None:
                    rebuild_from = begin if rebuild_from is None else min(rebuild_from, begin)
                continue
            self.files.append(f)
            if f.index_count > 1:
                self.last_indexed_phy = max(self.last_indexed_phy, f.end_phy_offset)
                prev_end = max(prev_end, f.end_phy_offset)
        if rebuild_from is not None:
            # A record's keys may straddle a kept and a dropped file: re-index it whole (lookups
            # de-duplicate offsets).
            self.last_indexed_phy = min(self.last_indexed_phy, rebuild_from - 1)
        return rebuild_from

    @staticmethod
    def _legacy_hash(f: IndexFile, keys_at: Callable[[int], list[str] | None]) -> bool:
        """Whether ``f``'s newest entry hashes one of its record's keys as ``crc32 & 0x7FFFFFFF`` (what this
        product wrote before it matched RocketMQ) rather than ``abs(String.hashCode)``."""
        if f.index_count <= 1:
            return False
        h, phy, _, _ = INDEX_ENTRY.unpack_from(f.mv, f._entries_base + (f.index_count - 1) * INDEX_ENTRY_SIZE)
        keys = keys_at(phy)
        if not keys or any(index_key_hash(k) == h for k in keys):
            return False
        return any(zlib.crc32(k.encode()) & 0x7FFFFFFF == h for k in keys)

    def _new_file(self) -> IndexFile:
        self.root.mkdir(parents=True, exist_ok=True)
        now = self.now_ms()
        while True:
            name = dt.datetime.fromtimestamp(now / 1000).strftime("%Y%m%d%H%M%S") + f"{now % 1000:03d}"
            path = self.root / name
            if not path.exists():
                break
            now += 1
        if self.files:  # the full file first: a failure (raised) leaves no new file behind
            self.files[-1].flush()
        f = IndexFile(path, self.hash_slot_num, self.index_num, create=True)
        self.files = [*self.files, f]
        return f

    def _writable(self) -> IndexFile:
        if self.files and not self.files[-1].is_write_full():
            return self.files[-1]
        return self._new_file()

    def build_batch(self, batch: list[tuple]) -> None:
        """Index dispatched records ``(phy, size, topic, queue_id, queue_offset, tags_code, store_ts, keys,
        uniq_key, sys_flag)``: the unique key and every KEYS value, as ``topic#key``."""
        entries, last = index_entries(batch, self.last_indexed_phy)
        with self._lock:
            if entries:
                f = self._writable()
                done = f.put_keys(entries, 0)
                while done < len(entries):
                    f = self._rollover(f)
                    done = f.put_keys(entries, done)
                f.write_header()
            self.last_indexed_phy = last

    def _rollover(self, full: IndexFile) -> IndexFile:
        full.write_header()
        return self._new_file()

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], bool]:
        """Candidate offsets for ``topic#key`` in ``[begin, end]`` ms, newest first, and whether more
        candidates than ``max_num`` exist (checked by asking for one more)."""
        key_hash = index_key_hash(index_key(topic, key))
        out: list[int] = []
        seen: set[int] = set()
        for f in reversed(self.files):
            if len(out) > max_num:
                break
            if f.index_count <= 1 or not f.is_time_matched(begin, end):
                continue
            for phy in f.select_phy_offsets(key_hash, max_num + 1 - len(out), begin, end):
                if phy not in seen:
                    seen.add(phy)
                    out.append(phy)
        return out[:max_num], len(out) > max_num

    def last_update(self) -> tuple[int, int]:
        if not self.files:
            return 0, 0
        f = self.files[-1]
        return f.end_timestamp, f.end_phy_offset

    def flush(self) -> None:
        with self._lock:
            files = self.files
        if files:
            files[-1].flush()

    def delete_expired_files(self, min_phy_offset: int) -> int:
        """Delete non-active files whose last entry is below ``min_phy_offset``."""
        files = self.files
        doomed = [f for f in files[:-1] if f.end_phy_offset < min_phy_offset]
        for f in doomed:
            f.destroy()
        if doomed:
            self.files = [f for f in files if f not in doomed]
        return len(doomed)

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []
        self.last_indexed_phy = -1

    def close(self) -> None:
        for f in self.files:
            f.close()
