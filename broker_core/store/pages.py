"""Page-cache work on mapped segments: ``populate_write`` faults in, writable, the pages of a range of a shared
file mapping (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+) without changing a byte, so that later writes there
take no page fault. The prefault thread (``prefault.py``) calls it ahead of the CommitLog's writer.

The C twin (``_native.populate_write``) releases the GIL for the call, so the faults are taken on another core
while the writer goes on; this pure one (``mmap.madvise``) holds the GIL for it. Both ask in ``SLICE``s, so no one
call runs long in the kernel (the stalls of a populating thread on this VM came from readahead, not from the calls'
length: prefault.py switches it off where the device reads ahead megabytes). Both widen the range to whole
pages, refuse a range outside the buffer (ValueError), return False where the kernel has no such advice (EINVAL,
or not Linux) and raise OSError for any other failure. ``buf`` is an ``mmap.mmap``.
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
from pathlib import Path

from broker_core.codec.native import NATIVE

MADV_POPULATE_WRITE: int | None = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform == "linux" else None)
SLICE = 128 * 1024  # bytes a madvise call (about 0.2 ms of page zeroing here)
# A readahead window larger than this makes a populating fault zero megabytes of folios at once (prefault.py)
LARGE_READAHEAD_KB = 1024


def populate_write(buf: mmap.mmap, start: int, length: int) -> bool:
    if start < 0 or length < 0 or start > len(buf) or length > len(buf) - start:
        raise ValueError("populate_write: range outside the buffer")
    if length == 0:
        return True
    if MADV_POPULATE_WRITE is None:
        return False
    lo = start - start % mmap.PAGESIZE  # madvise wants a page-aligned start; the kernel rounds the end up
    end = start + length
    try:
        for at in range(lo, end, SLICE):
            buf.madvise(MADV_POPULATE_WRITE, at, min(SLICE, end - at))
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    return True


def device_readahead_kb(path: str | Path, sys_root: Path = Path("/sys")) -> int | None:
    """The readahead window, in KiB, of the block device that holds ``path`` (sysfs: the disk's queue, or the
    parent disk's for a partition, or its backing device's), None where it cannot be told (not Linux, a
    filesystem without a block device)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for rel in (f"dev/block/{dev}/queue/read_ahead_kb", f"dev/block/{dev}/../queue/read_ahead_kb",
                f"class/bdi/{dev}/read_ahead_kb"):
        try:
            return int((sys_root / rel).read_text().strip())
        except (OSError, ValueError):
            continue
    return None


py_populate_write = populate_write  # the pure twin stays reachable for the equality tests
if NATIVE is not None:
    populate_write = NATIVE.populate_write
