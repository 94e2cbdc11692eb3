"""Read-ahead for cold sequential pulls: ask the kernel to start reading the bytes just past a pull before the
pull after it faults them in one small read at a time.

A pull is answered with views of the mapped CommitLog, so a cold read happens as page faults while the server
writes the answer, each fault a synchronous read of the kernel's modest read-around. Before a pull is read,
:func:`read_ahead` issues ``posix_fadvise(POSIX_FADV_WILLNEED)`` on ``[read, read + window)`` of the segment files
(the CommitLog's or a ConsumeQueue's): the kernel queues large reads into the page cache and returns at once; the
faults that follow find the pages there, or wait on reads already in flight. RocketMQ 5's switch,
``dataReadAheadEnable`` (default true), turns this on; off, reads take the kernel's default read-around as before
(upstream, false advises the CommitLog ``MADV_RANDOM``; here it only stops this advice).

Invariants:
1. Never past the written end: each segment is advised only below its ``wrote_position`` read at the time
   (its published read bound, ``MappedFile`` invariant 2), and never past the queue's max offset.
2. Once per window: each segment keeps a high-water mark, ``MappedFile.read_ahead_end``, of what was advised;
   a read is advised again only when it comes within half a window of the mark, and then only from the mark on.
   A consumer reading a segment straight through costs one ``fadvise`` per half window, not one per pull. A read
   more than a window below the mark (a consumer reset back, or a second consumer further behind) starts the
   window again from the read.
3. Nothing for reads at the tail: a read less than a window behind the queue's max offset is left alone (those
   pages were just written: they are in the page cache, and a hot consumer pays one comparison a pull).
4. A window that runs past a segment's end goes on into the next segment (the read after a roll is advised too);
   a segment being destroyed (retention) is skipped: ``hold()`` refuses it, and its mark goes with it.

Crash behaviour: advice changes no byte and no position; nothing here needs recovery.
"""

from __future__ import annotations

import os

from broker_core.store.mapped_file import MappedFile
from broker_core.store.mapped_file_queue import MappedFileQueue

COMMIT_LOG_WINDOW = 16 * 1024 * 1024  # CommitLog bytes advised ahead of a cold pull (4, 8, 16, 32 MiB measured)
CONSUME_QUEUE_WINDOW = 1024 * 1024  # ConsumeQueue bytes (52k units) advised ahead of a cold pull

HAVE_FADVISE = hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_WILLNEED")


def advise_willneed(mf: MappedFile, start: int, end: int) -> int:
    """``POSIX_FADV_WILLNEED`` on ``[start, end)`` of ``mf`` (file positions), clipped to its written end; its mark
    (``read_ahead_end``) becomes the end advised. Returns the bytes advised (0: nothing to do, the
    file is being destroyed, or the platform has no call; an ``OSError`` from the kernel is swallowed, as advice
    is only a hint)."""
    if not HAVE_FADVISE or not mf.hold():
        return 0
    try:
        end = min(end, mf.wrote_position)
        if end <= start:
            return 0
        try:
            os.posix_fadvise(mf.fd, start, end - start, os.POSIX_FADV_WILLNEED)
        except OSError:
            return 0
        mf.read_ahead_end = end
        return end - start
    finally:
        mf.release()


def read_ahead(queue: MappedFileQueue, offset: int, window: int) -> int:
    """Advise ``[offset, offset + window)`` of ``queue`` (queue offsets, as ``find_mapped_file_by_offset``) when a
    read at ``offset`` is more than a window behind the queue's max offset and what was advised reaches less than
    half a window past it (invariants 1-4). Returns the bytes advised."""
    if queue.max_offset() - offset <= window:
        return 0
    mf = queue.find_mapped_file_by_offset(offset)
    if mf is None:
        return 0
    size = queue.mapped_file_size
    base = mf.file_from_offset
    need, end = offset + window // 2, offset + window
    done = _advise_in(mf, offset - base, min(size, need - base), min(size, end - base), window)
    nxt = base + size
    if need > nxt:  # the half window runs into the next segment: its head is advised before the read gets there
        follow = queue.find_mapped_file_by_offset(nxt)
        if follow is not None and follow.file_from_offset == nxt:
            done += _advise_in(follow, 0, need - nxt, end - nxt, window)
    return done


def _advise_in(mf: MappedFile, pos: int, need: int, end: int, window: int) -> int:
    """Within one segment: nothing when its mark reaches ``need`` (or its written end), else advise from the mark
    (from ``pos`` when the mark is more than a window past it: a rewind) to ``end``."""
    mark = mf.read_ahead_end
    if mark > pos + window:
        mark = pos
    if mark >= min(need, mf.wrote_position):
        return 0
    return advise_willneed(mf, max(pos, mark), end)
