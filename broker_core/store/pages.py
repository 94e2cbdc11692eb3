"""Page-cache work on mapped segments. ``sync_range`` makes a written range durable and ``read_in`` reads a
range into the page cache ahead of ``pwrite`` (below). ``populate_write`` faults in, writable, the pages of a range
of a shared file mapping (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+) without changing a byte, so that later
writes there take no page fault. The prefault thread (``prefault.py``) calls it ahead of the CommitLog's writer.

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
from contextlib import suppress
from pathlib import Path

from broker_core.codec.native import NATIVE

MADV_POPULATE_WRITE: int | None = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform == "linux" else None)
SLICE = 128 * 1024  # bytes a madvise call (about 0.2 ms of page zeroing here)
# A readahead window larger than this makes a populating fault zero megabytes of folios at once (prefault.py)
LARGE_READAHEAD_KB = 1024
MAP_NORESERVE: int = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)


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


def read_in(fd: int, start: int, length: int) -> bool:
    """Bring ``[start, start+length)`` of the file into the page cache (``posix_fadvise(WILLNEED)`` in ``SLICE``
    steps, the GIL released), so that a ``pwrite`` there later finds its pages in place. The CommitLog's blocks
    are allocated but unwritten, so the kernel fills the pages with zeros without reading the disk, and they stay
    clean (nothing to write back). A ``pwrite`` of 32 KiB into a fresh segment here: 0.92-0.98 us per KiB, into
    pages read in: 0.26 us (the zeroing and allocation moved to the prefault thread). False where the platform has
    no such advice; OSError for a failed call; ValueError for a negative start or length.

    The C twin (``_native.read_in``) releases the GIL once for all the steps; this one gives it up and takes it back
    at each step, which behind a busy writer can wait up to a switch interval each time (5 ms in a process that
    does not lower it), while the writer goes on and zeroes, in its own ``pwrite``, the pages not read in yet
    (``perf`` of the in-process put row with the machine's memory fresh: 24% of the samples in ``__pi_memset`` under
    ``ext4_block_write_begin`` with the pure twin, 37% with no prefault at all). Alternating the twins in that row:
    245-258k against 235-237k msg/s with fresh memory, no difference (230k, 229k) once pages were recycled."""
    if start < 0 or length < 0:
        raise ValueError("read_in: negative start or length")
    advise = getattr(os, "posix_fadvise", None)
    willneed = getattr(os, "POSIX_FADV_WILLNEED", None)
    if advise is None or willneed is None:
        return False
    end = start + length
    for at in range(start, end, SLICE):
        advise(fd, at, min(SLICE, end - at), willneed)
    return True


def sync_range(buf: mmap.mmap, start: int, length: int) -> None:
    """Make ``[start, start+length)`` of a shared file mapping durable: ``msync(MS_SYNC)`` of the pages holding it
    (the kernel's ``vfs_fsync_range`` over that range, as ``fdatasync`` is over the whole file: data, the metadata
    needed to read it back, and a device cache flush). Only that range is written back: the pages the prefault
    thread faulted in past the write position stay dirty zeros instead of being written and cleaned (each page
    cleaned is a TLB shootdown of the writer's CPU, and the writer's next store to it a write fault: bench.store's
    put row 130-185k -> 225-245k msg/s on this VM). The C twin releases the GIL; ``mmap.flush`` (this one) holds it.
    ValueError for a range outside the buffer; OSError from the kernel."""
    if start < 0 or length < 0 or start > len(buf) or length > len(buf) - start:
        raise ValueError("sync_range: range outside the buffer")
    if length == 0:
        return
    lo = start - start % mmap.PAGESIZE  # msync wants a page-aligned start; the kernel rounds the end up
    buf.flush(lo, start + length - lo)


def staging_buffer(size: int) -> mmap.mmap:
    """An anonymous private buffer of ``size`` bytes for a segment's staged appends (``MappedFile.stage``): not
    swap-reserved (``MAP_NORESERVE``), in transparent huge pages where the kernel has them (one fault per 2 MiB).
    OSError when the kernel refuses it (strict overcommit)."""
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
    with suppress(AttributeError, OSError):
        buf.madvise(mmap.MADV_HUGEPAGE)
    return buf


def give_back(buf: mmap.mmap, start: int, length: int) -> None:
    """``[start, start+length)`` of a staging buffer back to the kernel (``MADV_DONTNEED``: reads as zeros after);
    where it cannot, the memory stays until the buffer is closed."""
    with suppress(AttributeError, OSError):
        buf.madvise(mmap.MADV_DONTNEED, start, length)


py_populate_write = populate_write  # the pure twins stay reachable for the equality tests
py_sync_range = sync_range
py_read_in = read_in
if NATIVE is not None:
    populate_write = NATIVE.populate_write
    sync_range = NATIVE.sync_range
    read_in = NATIVE.read_in
