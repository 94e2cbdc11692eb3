"""AllocateMappedFileService: create (and, with ``warmMapedFileEnable``, warm) the next CommitLog segment off the
append path.

When the writer asks for segment N it receives the one prepared in advance, or creates it cold if none was
prepared, and a background thread starts preparing segment N+1. Preparing is creating the sparse file, mapping it
and making its name durable: no block of it is written or reserved (a fresh broker's two segments take no disk),
unless ``warm`` (RocketMQ's ``warmMapedFileEnable``, default off), which writes the whole segment with zeros and
syncs it (``MappedFile.warm``: a segment's size on disk and a second write of every byte). Pages are otherwise
prepared only a window ahead of the writer (``prefault.py``). Crash behaviour: a prepared but unused segment is a
file of zeros (a hole); recovery finds no record in it and deletes it.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from broker_core.store.mapped_file import MappedFile

log = logging.getLogger(__name__)


class AllocateMappedFileService:
    def __init__(self, warm: bool = False) -> None:
        self.warm = warm
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="allocate-mapped-file")
        self._pending: dict[Path, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _create(self, path: Path, size: int) -> MappedFile:
        mf = MappedFile(path, size, create=True)
        if self.warm:
            mf.warm()
        return mf

    def __call__(self, path: Path, next_path: Path, size: int) -> MappedFile:
        with self._lock:
            fut = self._pending.pop(path, None)
        mf = None
        if fut is not None:
            try:
                mf = fut.result()
            except OSError as exc:
                log.warning("pre-allocation of %s failed (%s); creating it now", path, exc)
        if mf is None:
            # Nothing prepared (the first segment, or a failed preparation): create it now without the
            # warm-up, which would stall the writer (and the server's event loop) for the whole file.
            mf = MappedFile(path, size, create=True)
        with self._lock:
            if not self._closed and next_path not in self._pending and not next_path.exists():
                self._pending[next_path] = self._pool.submit(self._create, next_path, size)
        return mf

    def prepare(self, path: Path, size: int) -> None:
        """Start preparing ``path`` in the background (e.g. the first segment of an empty store)."""
        with self._lock:
            if not self._closed and path not in self._pending and not path.exists():
                self._pending[path] = self._pool.submit(self._create, path, size)

    def wait_idle(self) -> None:
        """Wait for segments being prepared (benchmarks measure the steady state)."""
        with self._lock:
            pending = list(self._pending.values())
        for fut in pending:
            fut.exception()

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        for fut in pending:  # prepared but never used: remove, so the store holds only real segments
            try:
                fut.result().destroy(0, 0)
            except OSError:
                pass
        self._pool.shutdown(wait=True)
