"""MappedFileQueue: a directory of same-size segments forming one logical byte space (INVENTORY §4).

Invariants:
1. Files are sorted by ``file_from_offset`` and contiguous: each starts where the previous ends.
   The first file need not start at 0 (retention deletes old ones), so lookups never assume it.
2. Only the last file is written; every earlier file is full (its wrote position is its size).
3. ``files`` is replaced, never mutated in place (copy on write), so readers can iterate a snapshot
   without a lock while the writer adds or retention removes files.

4. ``flushed_where`` only grows through a successful sync. After one fails, ``flush_error`` is
   set and every later :meth:`flush` raises it again without syncing: the position never moves past data
   whose write-back failed (see ``durability.py``).

Crash behaviour: on load every file is assumed full; recovery then walks records and sets the real
positions with :meth:`truncate_dirty_files`. Leftover ``*.tmp`` files from an interrupted creation
are deleted at load.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from broker_core.store.durability import OTHER
from broker_core.store.errors import StoreError
from broker_core.store.mapped_file import MappedFile, offset_to_file_name

log = logging.getLogger(__name__)

# An unfinished segment (a ``.tmp`` the allocator left) is renamed with this suffix, out of every segment's way
# (the allocator may create the same ``.tmp`` name again at once), then unlinked on a thread: freeing a 1 GiB
# preallocated file took 0.1-0.6 s of a recovery here. A crash before the unlink leaves the renamed file, which
# the next load discards the same way; loads never take it for a segment.
DISCARD_SUFFIX = ".discard"


def discard(path: Path) -> None:
    """Rename ``path`` to end in :data:`DISCARD_SUFFIX` (unless it does), then unlink it on a daemon thread."""
    if not path.name.endswith(DISCARD_SUFFIX):
        path = path.rename(path.with_name(path.name + DISCARD_SUFFIX))
    threading.Thread(target=_unlink_quietly, args=(path,), name="discard-segment", daemon=True).start()


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:  # the next load tries again
        log.warning("cannot remove %s: %s", path, exc)

DELETE_FILES_BATCH_MAX = 10

Allocator = Callable[[Path, Path, int], MappedFile]


class MappedFileQueue:
    def __init__(self, store_path: str | os.PathLike[str], mapped_file_size: int,
                 allocator: Allocator | None = None, sync_kind: str = OTHER) -> None:
        self.store_path = Path(store_path)
        self.mapped_file_size = mapped_file_size
        self.allocator = allocator
        self.sync_kind = sync_kind
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.flushed_timestamp = 0  # store time of a record below ``flushed_where`` (0: none known yet)
        self.flush_error: OSError | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ load
    def load(self, derived: bool = False) -> str:
        """Open every segment. A wrong size, a gap between segments or a stray file raises ``StoreError``, unless
        ``derived`` (a ConsumeQueue: rebuildable from the CommitLog): then the files from the first bad one on
        are deleted and the reason is returned (``""`` when all is well), so the caller can rebuild them."""
        if not self.store_path.is_dir():
            return ""
        for tmp in [*self.store_path.glob("*.tmp"), *self.store_path.glob("*" + DISCARD_SUFFIX)]:
            log.warning("removing unfinished segment %s", tmp)
            discard(tmp)
        names = sorted(p for p in self.store_path.iterdir() if p.is_file() and not p.name.endswith(DISCARD_SUFFIX))
        files: list[MappedFile] = []
        problem = ""
        for i, path in enumerate(names):
            if not (len(path.name) == 20 and path.name.isdigit()):
                problem = f"unexpected file in {self.store_path}: {path.name}"
            elif (size := path.stat().st_size) != self.mapped_file_size:
                problem = (f"segment {path} is {size} bytes but the configured size is {self.mapped_file_size}; "
                           "the segment size cannot change on an existing store")
            elif files and files[-1].file_from_offset + self.mapped_file_size != int(path.name):
                problem = f"segments are not contiguous: {files[-1].path} then {path}"
            if problem:
                if not derived:
                    for mf in files:
                        mf.close()
                    raise StoreError(problem)
                for doomed in names[i:]:
                    log.error("%s: deleting %s (derived data, rebuilt from the CommitLog)", problem, doomed.name)
                    doomed.unlink()
                break
            mf = MappedFile(path, self.mapped_file_size)
            mf.set_positions(self.mapped_file_size)
            files.append(mf)
        self.files = files
        return problem

    # ------------------------------------------------------------------ lookups
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True) -> MappedFile | None:
        """The file to write into: the last one, or a new one when there is none or it is full."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        if not need_create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        path = self.store_path / offset_to_file_name(create_offset)
        next_path = self.store_path / offset_to_file_name(create_offset + self.mapped_file_size)
        if self.allocator is not None:
            mf = self.allocator(path, next_path, self.mapped_file_size)
        else:
            mf = MappedFile(path, self.mapped_file_size, create=True)
        with self._lock:
            mf.first_create_in_queue = not self.files
            self.files = [*self.files, mf]
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first, last = files[0], files[-1]
        size = self.mapped_file_size
        if first.file_from_offset <= offset < last.file_from_offset + size:
            index = offset // size - first.file_from_offset // size
            if 0 <= index < len(files):
                mf = files[index]
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
            for mf in files:
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
        return first if return_first_on_not_found else None

    def get_mapped_file_by_time(self, timestamp_ms: int) -> MappedFile | None:
        files = self.files
        for mf in files:
            if mf.last_modified_ms() >= timestamp_ms:
                return mf
        return files[-1] if files else None

    def min_offset(self) -> int:
        first = self.first()
        return first.file_from_offset if first is not None else -1

    def max_offset(self) -> int:
        last = self.last()
        return last.file_from_offset + last.read_position if last is not None else 0

    def max_wrote_position(self) -> int:
        last = self.last()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    # ------------------------------------------------------------------ flush
    def flush(self, least_pages: int = 0) -> bool:
        """Flush the file holding ``flushed_where``. True when something was flushed. Raises ``OSError`` when
        the sync fails, and again on every later call (invariant 4)."""
        if self.flush_error is not None:
            raise OSError(self.flush_error.errno, f"an earlier flush failed: {self.flush_error.strerror}")
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return False
        try:
            where = mf.file_from_offset + mf.flush(least_pages, self.sync_kind)
        except OSError as exc:
            self.flush_error = exc
            raise
        flushed = where != self.flushed_where
        self.flushed_where = where
        if mf.flushed_timestamp:
            self.flushed_timestamp = mf.flushed_timestamp
        return flushed

    # ------------------------------------------------------------------ truncation and deletion
    def truncate_dirty_files(self, offset: int, now_ms: int = 0) -> None:
        """Cut everything at and after ``offset``: the file containing it keeps its prefix, files
        wholly after it are deleted."""
        keep = []
        for mf in self.files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail > offset:
                if offset >= mf.file_from_offset:
                    mf.set_positions(offset % self.mapped_file_size)
                    keep.append(mf)
                else:
                    mf.destroy(1000, now_ms)
            else:
                keep.append(mf)
        with self._lock:
            self.files = keep

    def delete_expired_file_by_time(
        self,
        expired_ms: int,
        delete_files_interval_ms: int,
        interval_forcibly_ms: int,
        clean_immediately: bool,
        now_ms: int,
        sleep: Callable[[float], None],
    ) -> list[MappedFile]:
        """Delete the oldest non-active files whose last modification is older than ``expired_ms``
        (or any age when ``clean_immediately``); at most :data:`DELETE_FILES_BATCH_MAX` a pass, stopping
        at the first file that is not expired or cannot be destroyed yet. Returns the deleted files."""
        candidates = self.files[:-1]
        deleted: list[MappedFile] = []
        for i, mf in enumerate(candidates):
            if not (now_ms >= mf.last_modified_ms() + expired_ms or clean_immediately):
                break
            if not mf.destroy(interval_forcibly_ms, now_ms):
                break
            deleted.append(mf)
            if len(deleted) >= DELETE_FILES_BATCH_MAX:
                break
            if i + 1 < len(candidates) and delete_files_interval_ms > 0:
                sleep(delete_files_interval_ms / 1000)
        self._remove(deleted)
        return deleted

    def delete_expired_file_by_offset(self, min_phy_offset: int, unit_size: int, now_ms: int,
                                      read_last_phy: Callable[[MappedFile], int | None]) -> list[MappedFile]:
        """ConsumeQueue cleaning: delete non-active files whose last unit points below ``min_phy_offset``."""
        deleted = []
        for mf in self.files[:-1]:
            last_phy = read_last_phy(mf)
            if last_phy is None or last_phy >= min_phy_offset:
                break
            if not mf.destroy(60_000, now_ms):
                break
            deleted.append(mf)
        self._remove(deleted)
        return deleted

    def _remove(self, deleted: list[MappedFile]) -> None:
        if not deleted:
            return
        gone = {id(mf) for mf in deleted}
        with self._lock:
            self.files = [mf for mf in self.files if id(mf) not in gone]

    def close(self) -> None:
        for mf in self.files:
            mf.close()

    def destroy(self, now_ms: int = 0) -> None:
        for mf in self.files:
            mf.destroy(0, now_ms)
        with self._lock:
            self.files = []
        self.flushed_where = 0
        if self.store_path.is_dir():
            try:
                self.store_path.rmdir()
            except OSError:
                pass
