"""PrefaultService: fault in the pages just ahead of the CommitLog's write position, on its own thread.

A segment is created sparse (``mapped_file.create_sparse``): no page of it is in memory or on disk, so the
first write to each page of the mapping faults, and the kernel allocates and zeroes a page-cache page there and
then: on the appending thread, under the put lock, in a broker on the event loop. ``perf record`` of the broker
under ``bench.broker``'s batched produce put a third of its CPU there (``zero_user_segments`` under the fault);
on a virtual machine whose free memory goes back to the host, a fresh page also costs the host a fault.

This thread first reserves the window's blocks (``MappedFile.reserve``, ``posix_fallocate``: a full disk shows
up here, logged, rather than as a SIGBUS of a store through the mapping; a segment then takes real disk only up
to ``prefaultAheadBytes`` past its data, never whole, unless ``warmMapedFileEnable``), then takes those faults:
``pages.populate_write`` (``madvise(MADV_POPULATE_WRITE)``, the GIL released)
over the next ``prefaultAheadBytes`` past the write position, in one call per request (``CHUNK`` at most), so the
writer finds the pages mapped and writable. RocketMQ's ``warmMapedFileEnable`` (off by default, as here) instead
writes the whole next segment with zeros and syncs it: a second disk write of every byte. Here the pages faulted in
ahead are dirty zeros; the store's flushes sync only the written range (``pages.sync_range``), but the kernel's own
write-back may write at most ``prefaultAheadBytes`` of zeros past the data, which the data overwrites later; readers
never read past the write position, and recovery reads zeros as the end of the log, as it reads the unwritten blocks.

The writer (``CommitLog``) calls :meth:`request` after an append once its position is within half the window of
the end it last asked for (a comparison per put call; a wake about every half window, 4 MiB by default). The pages just
past the writer (``gap``, 256 KiB at most) are left to it, since a write to a page being populated waits for it;
the thread runs as SCHED_IDLE (below) so that on busy CPUs the threads serving requests go first (it then falls
behind, and the writer faults in what it has not reached).

Readahead is switched off (``MADV_RANDOM``) on the segment the thread populates, and back on (``MADV_NORMAL``) when
it moves to the next one or stops: a populating fault on a file mapping otherwise reads ahead, and the kernel zeroes
the large folios it allocates for that in one stretch that cannot be preempted (this kernel runs without kernel
preemption). ``perf sched`` of bench.broker's 20k msg/s row showed this thread on a CPU for 11-19 ms at each request,
whatever its scheduling class, and every other process waiting (the latency rows' stalls, one every 8 MiB written);
with readahead off the faults come a page at a time, preemptible between pages (a toy of the same populate beside a
CPU-bound process: stalls of an unrelated process 19 ms -> none over 5 ms). The thread also runs as ``SCHED_IDLE``
(nice 10 where that is refused), so any other runnable thread goes first. Reads of the segment being written hit the
page cache; older segments keep their readahead. Readahead stays on where the device's window is small
(``pages.LARGE_READAHEAD_KB``, 1 MiB; most disks read ahead 128 KiB): its folios are small there, and populating
through readahead costs the kernel less than a page at a time (on this VM, with 8 MiB windows, 1.5-2 ms instead of
8-11 ms per 8 MiB; a small window could not be measured here).

With ``commitLogWriteMode=pwrite`` (the default) the segment being written is staged (``MappedFile.stage``): no
page of the mapping is written, so none needs faulting in, but a ``pwrite`` into a page not in the page cache
allocates and zeroes it on the writer. The thread then reads the pages ahead in instead (``pages.read_in``,
``posix_fadvise(WILLNEED)``): the reserved, unwritten blocks come in as clean zero pages without disk reads
(writer's CPU per KiB appended 0.92-0.98 -> 0.26 us in a toy of 32 KiB ``pwrite``s). Readahead is left alone then.

Invariants: no byte of any file changes; only which pages are mapped. A segment being destroyed is skipped
(``MappedFile.populate`` holds it for the call). Where the kernel has no such advice (before Linux 5.14, or not
Linux) the service says so once and stops; a failing call is logged once and stops it too. Appends never wait
for it: they fault in what it has not reached, as without it.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections.abc import Callable

from broker_core.store.mapped_file import NO_SPACE, MappedFile
from broker_core.store.pages import LARGE_READAHEAD_KB, device_readahead_kb

log = logging.getLogger(__name__)

NICE = 10  # the thread's nice value (Linux sets it per thread)
# At most this much per madvise call (the stop flag and a newer request are seen between calls). Each call gives the
# GIL up and must get it back, which a thread waiting behind a busy one does only after the switch interval
# (CPython's default 5 ms; a broker lowers it, remoting/loops.py): with 256 KiB a call, an in-process store under
# a batched writer (about 200 MB/s) ran ahead of this thread, which populated about a quarter of the pages, and
# the writer faulted in the rest under the put lock (bench.store's put rows: 2.0-2.7 us of kernel time per 1 KiB
# message on the writer; 0.5-1.0 us with one call for the whole window, and 168-199k -> 216-282k msg/s).
CHUNK = 8 * 1024 * 1024
GAP = 256 * 1024  # left to the writer past its position: populating the page it is writing makes it wait


class PrefaultService:
    def __init__(self, ahead: int, on_no_space: Callable[[OSError], None] | None = None) -> None:
        """``on_no_space``: called (on this thread) when the window cannot be reserved for lack of space, so the
        store refuses puts before the writer passes what is reserved (``MessageStore`` marks the disk full)."""
        if ahead <= 0:
            raise ValueError(f"prefault window must be positive, got {ahead}")
        self.ahead = ahead
        self.on_no_space = on_no_space
        self.low_water = ahead // 2  # ask again once the writer is this close to the populated end
        self.gap = min(GAP, ahead // 4)  # left to the writer just past its position
        self.stopped = False  # set when the platform cannot, a call failed, or shutdown
        self._want: MappedFile | None = None
        self._random: MappedFile | None = None  # the segment whose readahead this thread switched off
        self._large_readahead: bool | None = None  # the device reads ahead so much that it must be off (once)
        self._reserve_failed = False  # the last reserve failed (logged once until one succeeds again)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def wanted(self, mf: MappedFile) -> bool:
        """Whether the writer at ``mf.wrote_position`` should :meth:`request` more (the put path's check): it is
        within ``low_water`` of the end last asked for. Asked, not reached: while the thread works on a request
        (or lags behind a busy writer), the puts meanwhile do not ask again (they did, every one, before)."""
        return mf.wrote_position + self.low_water > mf.prefault_end and mf.prefault_end < mf.file_size

    def request(self, mf: MappedFile) -> None:
        """Populate up to ``ahead`` bytes past ``mf``'s write position (returns at once)."""
        if self.stopped:
            return
        mf.prefault_end = min(mf.wrote_position + self.ahead, mf.file_size)
        self._want = mf
        if not self._wake.is_set():
            self._wake.set()

    def start(self) -> PrefaultService:
        self._thread = threading.Thread(target=self._run, name="prefault-commitlog", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:  # a background helper: the threads serving requests come first when the CPUs are busy
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
            except (AttributeError, OSError):
                pass  # not Linux (a per-thread nice), or not allowed: run at the process's priority
        while not self.stopped:
            self._wake.wait()
            self._wake.clear()
            mf = self._want
            if mf is None or self.stopped:
                continue
            if mf is not self._random and not mf.staged:
                self._readahead_off(mf)
            upto = min(mf.wrote_position + self.ahead, mf.file_size)
            try:
                mf.reserve(upto)
            except OSError as exc:  # populating goes on (under pwrite it needs no blocks); a full disk stops puts
                if not self._reserve_failed:
                    log.warning("cannot reserve CommitLog blocks ahead of the writer in %s (%s)", mf.path, exc)
                self._reserve_failed = True
                if exc.errno in NO_SPACE and self.on_no_space is not None:
                    self.on_no_space(exc)
            else:
                self._reserve_failed = False
            try:
                done = mf.populate(upto, CHUNK, lambda: self.stopped, self.gap)
            except OSError as exc:
                log.warning("prefaulting CommitLog pages stops: madvise failed on %s (%s)", mf.path, exc)
                done = False
            else:
                if not done:
                    log.info("prefaulting CommitLog pages is off: the kernel has no MADV_POPULATE_WRITE")
            if not done:
                self.stopped = True
        self._readahead_off(None)

    def _readahead_off(self, mf: MappedFile | None) -> None:
        """Readahead back on for the segment populated before, off for ``mf`` (the one populated now), where the
        device's readahead window is large (or unknown)."""
        if mf is not None and self._large_readahead is None:
            kb = device_readahead_kb(mf.path)
            self._large_readahead = kb is None or kb > LARGE_READAHEAD_KB
        if not self._large_readahead:
            return
        if self._random is not None:
            self._random.advise(getattr(mmap, "MADV_NORMAL", 0))
        self._random = mf
        random = getattr(mmap, "MADV_RANDOM", None)
        if mf is not None and random is not None:
            mf.advise(random)

    def shutdown(self) -> None:
        self.stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
