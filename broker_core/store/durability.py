"""Durability primitives: every ``fdatasync`` of store data, directory fsyncs, and the flush-failure latch.

Invariants:
1. Store data reaches the disk only through :func:`sync_mapped` (the written range of a CommitLog or ConsumeQueue
   segment) and :func:`datasync` (IndexFile, checkpoint and quarantine descriptors, a warmed segment). A name
   becomes durable only through :func:`fsync_dir` on its directory, called after a file is created or renamed
   into place (:func:`create_durable_dir` for new directories, up to the first that
   already existed).
2. A failed sync is never retried as if nothing happened: on Linux a write-back error is reported
   once and the dirty pages may then be marked clean, so a second call can succeed while the data is gone
   (PostgreSQL's "fsyncgate"). The caller records the failure in a :class:`FlushFailure`; from then on the
   store counts nothing more as flushed and refuses writes until the broker is restarted (and recovery, which
   never trusts the page cache of a failed disk more than the checkpoint, verifies the CommitLog again).

Test hook (honest fault injection, no monkeypatching of a live process): with the environment variable
``BROKER_CORE_FAULT_FSYNC_EIO_AFTER=N`` set when the process starts, the first ``N`` calls of :func:`datasync`
or :func:`sync_mapped` for CommitLog data succeed and every later one raises ``OSError(EIO)`` before touching the
file, as a failing disk would. Only CommitLog flushes are counted, so under SYNC_FLUSH the count follows the
produce sequence. In-process tests call :func:`inject_fsync_failure` instead. Unset (the default), the hook
costs one integer comparison per flush.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
import time
from pathlib import Path

from broker_core.store.pages import sync_range

log = logging.getLogger(__name__)

FAULT_ENV = "BROKER_CORE_FAULT_FSYNC_EIO_AFTER"

# what a datasync flushes; only COMMIT_LOG is counted by the fault hook
COMMIT_LOG = "commitlog"
OTHER = "other"


def _fault_from_env() -> int:
    raw = os.environ.get(FAULT_ENV, "").strip()
    if not raw:
        return -1
    value = int(raw)
    log.warning("%s=%d: CommitLog fsyncs after the first %d fail with EIO (a test hook)", FAULT_ENV, value, value)
    return value


class _Fault:
    __slots__ = ("after", "calls", "lock")

    def __init__(self) -> None:
        self.after = _fault_from_env()
        self.calls = 0
        self.lock = threading.Lock()

    def check(self) -> None:
        with self.lock:
            self.calls += 1
            if self.calls > self.after:
                raise OSError(errno.EIO, f"injected fsync failure ({FAULT_ENV}={self.after}, call {self.calls})")


_fault = _Fault()


def inject_fsync_failure(after: int | None) -> None:
    """In-process tests: CommitLog fsyncs after the next ``after`` fail with EIO; ``None`` turns the hook off."""
    with _fault.lock:
        _fault.after = -1 if after is None else after
        _fault.calls = 0


def datasync(fd: int, what: str = OTHER) -> None:
    """``os.fdatasync(fd)`` (releases the GIL); raises ``OSError`` on failure, never retries."""
    if what == COMMIT_LOG and _fault.after >= 0:
        _fault.check()
    os.fdatasync(fd)


def sync_mapped(buf: mmap.mmap, start: int, length: int, what: str = OTHER) -> None:
    """``[start, start+length)`` of a mapped segment made durable (``pages.sync_range``: ``msync(MS_SYNC)`` of
    that range, the GIL released); raises ``OSError`` on failure, never retries."""
    if what == COMMIT_LOG and _fault.after >= 0:
        _fault.check()
    sync_range(buf, start, length)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make the entries of directory ``path`` (names created, renamed or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_durable_dir(path: Path) -> None:
    """``mkdir -p path`` whose new entries are durable: each directory created is fsynced in its parent."""
    missing = []
    p = path
    while not p.is_dir():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            pass
        fsync_dir(d.parent)


class FlushFailure:
    """The store's latch for a failed flush: set once, cleared only by a restart (invariant 2)."""

    def __init__(self) -> None:
        self.error = ""
        self.at_ms = 0
        self._lock = threading.Lock()

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def record(self, what: str, exc: OSError) -> None:
        with self._lock:
            if self.error:
                return
            self.at_ms = int(time.time() * 1000)
            self.error = (f"fsync of {what} failed ({exc.strerror or exc}); the broker refuses writes until it is "
                          "restarted, and nothing after the last successful flush is counted as durable")
        log.critical("%s", self.error)
