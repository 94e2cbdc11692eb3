"""Page-cache work on mapped segments: ``populate_write`` faults in, writable, the pages of a range of a shared
file mapping (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+) without changing a byte, so that later writes there
take no page fault. The prefault thread (``prefault.py``) calls it ahead of the CommitLog's writer.

The C twin (``_native.populate_write``) releases the GIL for the call, so the faults are taken on another core
while the writer goes on; this pure one (``mmap.madvise``) holds the GIL for it. Both widen the range to whole
pages, refuse a range outside the buffer (ValueError), return False where the kernel has no such advice (EINVAL,
or not Linux) and raise OSError for any other failure. ``buf`` is an ``mmap.mmap``.
"""

from __future__ import annotations

import errno
import mmap
import sys

from broker_core.codec.native import NATIVE

MADV_POPULATE_WRITE: int | None = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform == "linux" else None)


def populate_write(buf: mmap.mmap, start: int, length: int) -> bool:
    if start < 0 or length < 0 or start > len(buf) or length > len(buf) - start:
        raise ValueError("populate_write: range outside the buffer")
    if length == 0:
        return True
    if MADV_POPULATE_WRITE is None:
        return False
    lo = start - start % mmap.PAGESIZE  # madvise wants a page-aligned start; the kernel rounds the end up
    try:
        buf.madvise(MADV_POPULATE_WRITE, lo, start + length - lo)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    return True


py_populate_write = populate_write  # the pure twin stays reachable for the equality tests
if NATIVE is not None:
    populate_write = NATIVE.populate_write
