"""The store directory's ``lock`` file: one process at a time opens a store (upstream takes the same exclusive
lock on ``<storePathRootDir>/lock``).

The lock is an ``flock`` on the open file, so the kernel drops it when the holder exits however it exits
(SIGKILL included): a stale ``lock`` file never keeps a restarted broker out. The holder writes its pid into
the file; a refused opener reads it back for the error message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from broker_core.store.errors import StoreLockedError


class DirectoryLock:
    def __init__(self, path: Path, store_dir: str | os.PathLike[str]) -> None:
        self.path = path
        self.store_dir = store_dir
        self._fd = -1

    def acquire(self) -> None:
        """Take the lock or raise :class:`StoreLockedError` naming the holder's pid."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"store directory {self.store_dir} is in use by another broker "
                f"(lock file {self.path}, pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (a no-op when not held)."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
