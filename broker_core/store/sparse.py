"""Sparse store files: created with ``ftruncate`` (RocketMQ's ``setLength``), so a file costs the disk only the
pages written, and measured by the blocks they really take.

Crash behaviour: a file is created under a ``.tmp`` name and renamed once its size is final, and its directory is
fsynced, so a crash leaves either no file or a whole one of the right size (every unwritten byte reads as zero).
"""

from __future__ import annotations

import os
from pathlib import Path

from broker_core.store.durability import create_durable_dir, fsync_dir
from broker_core.store.errors import StoreError


def create_sparse(path: Path, size: int) -> None:
    """Create ``path`` as a sparse file of ``size`` bytes (``ftruncate``: no block allocated, every byte reads as
    zero), atomically (``.tmp`` then rename), and make its name durable (the directory is fsynced, and so is each
    directory created for it). Its blocks are taken as pages are written (invariant 4)."""
    if path.exists():
        raise StoreError(f"segment {path} already exists")
    create_durable_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.rename(tmp, path)
    fsync_dir(path.parent)


def allocated_bytes(path: str | os.PathLike[str]) -> int:
    """The disk a file really takes (``st_blocks * 512``: holes cost nothing), 0 when it is gone."""
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0
