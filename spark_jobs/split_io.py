"""Where a split's bytes come from: the snapshot's file, mapped, or the broker over the network.

:func:`over_split` runs a walk (``spark_jobs.segments``) over a split's bytes: the snapshot's file, mapped, when
this host can open it; otherwise (or always, with ``prefer_local`` off) the broker's READ_SNAPSHOT_SEGMENT through
:mod:`spark_jobs.remote`: the split's range plus :data:`TAIL_BYTES` is fetched, the walk runs over it, and when
the walk stopped at bytes not fetched yet (its last record, or the next record's header, past the window) the
window is widened and the split walked again. A record larger than the tail that starts a split can make sync
miss it: the chain check then re-reads that segment whole, as for any chain break.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from broker_core.codec.message import FIXED_OVERHEAD, HEADER_SIZE, SIZE_MAGIC, MessageRecord
from spark_jobs.segments import STOP_END, Segment, Split, SplitStats, decode_at, open_segment

TAIL_BYTES = 1024 * 1024  # fetched past a split's end for its last record (widened when that is not enough)

T = TypeVar("T")


def reads_locally(remote: Any, path: str) -> bool:
    """Whether this host reads ``path`` itself: no broker to ask, or it prefers the file and can open it."""
    return remote is None or (remote.prefer_local and os.access(path, os.R_OK))


def over_split(split: Split, body: Callable[[Any, Split], tuple[SplitStats, T]]) -> tuple[SplitStats, T]:
    """``body(buf, split)`` over the split's segment bytes (see the module docstring for where they come from);
    ``body`` reads ``buf`` at the positions of the split it is given and must not close it. Fetched bytes come as
    a window starting at byte ``lo`` of the segment, walked through the split shifted by ``lo`` (positions and
    bound less ``lo``, ``file_from_offset`` plus ``lo``: every check of a record against its physical offset holds
    as in the file); the stats and the rows' ``pos`` are shifted back."""
    if reads_locally(split.remote, split.path):
        _start_queued()
        buf = open_segment(split.path, split.bound)
        try:
            return body(buf, split)
        finally:
            buf.close()
    win = _window(split)
    _start_queued()  # the next split's fetch overlaps this walk
    try:
        while True:
            lo = win.lo
            shifted = replace(split, file_from_offset=split.file_from_offset + lo, start=split.start - lo,
                              end=split.end - lo, bound=split.bound - lo)
            try:
                stats, out = body(win.buf, shifted)
            except (IndexError, struct.error):  # read past the mapping: a record runs past what was fetched
                if win.hi >= split.bound:
                    raise
                win.extend(win.hi + max(TAIL_BYTES, win.hi - lo))
                continue
            wanted = _fetch_more(win.buf, win.hi - lo, shifted, stats)
            if wanted is None:
                return _shift_back(stats, out, lo)
            win.extend(wanted + lo)
    finally:
        win.close()


def _window_lo(split: Split) -> int:
    """Where a split's window starts: one byte before a split inside the segment, so that the shifted split
    still starts past 0 (``sync`` takes a split starting at 0 for the segment's start, a record boundary)."""
    return split.start - 1 if split.start > 0 else 0


def _shift_back(stats: SplitStats, out: T, lo: int) -> tuple[SplitStats, T]:
    if lo:
        stats.first += lo if stats.first >= 0 else 0
        stats.last_end += lo if stats.last_end >= 0 else 0
        if stats.torn:
            stats.torn["pos"] += lo
        for row in out if isinstance(out, list) else ():
            row["pos"] += lo
    return stats, out


_prefetched: dict[tuple[str, int, int], Future[Any]] = {}
_queued: dict[tuple[str, int, int], Split] = {}  # asked for, started once the split being walked has its bytes
PREFETCH_MAX = 2  # windows fetched ahead and not yet walked, per process (each up to a split's bytes)


def _key(split: Split) -> tuple[str, int, int]:
    return split.path, split.start, split.end


def prefetch(split: Split) -> None:
    """Fetch ``split``'s window in the background (the prefetch thread, on its own connection) when it will be
    fetched at all, for the :func:`over_split` that comes next: the walk of one split overlaps the network read of
    the next.
    The runner calls it for the next split of a task, before walking the current one; the fetch starts once
    :func:`over_split` has the current split's bytes, so the two never share the link (a task's first window
    comes at full speed)."""
    key = _key(split)
    if reads_locally(split.remote, split.path) or key in _prefetched or key in _queued:
        return
    _queued[key] = split
    while len(_queued) > PREFETCH_MAX:
        _queued.pop(next(iter(_queued)))


def _start_queued() -> None:
    while _queued:
        _start(_queued.pop(next(iter(_queued))))


_executor: ThreadPoolExecutor | None = None


# CPython hands the GIL to a waiting thread only after the holder ran this long (``sys.setswitchinterval``, 5 ms
# by default). The prefetch thread needs the GIL back after every answer it receives (a few times a 4 MiB chunk)
# while the walking thread holds it, so at the default the stream stalled up to 5 ms a time and the fetch, not the
# walk, set the pace (bench.scan --pin, worker engine: 0.67x of local files at 5 ms, 0.88x at 0.5 ms).
SWITCH_INTERVAL_S = float(os.environ.get("SPARK_JOBS_SWITCH_INTERVAL_S", "0.0005"))


def _prefetcher() -> ThreadPoolExecutor:
    """One thread per process fetches ahead: it lives on, so its connection to each broker does too (a thread
    per window paid a new connection per split). Starting it lowers the process's GIL switch interval to
    :data:`SWITCH_INTERVAL_S` (never raises it): only processes that fetch over the network are affected."""
    global _executor
    if _executor is None:
        if 0 < SWITCH_INTERVAL_S < sys.getswitchinterval():
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="split-prefetch")
    return _executor


def _start(split: Split) -> None:
    while len(_prefetched) >= PREFETCH_MAX:  # never walked (a cancelled task): dropped
        _close(_prefetched.pop(next(iter(_prefetched))).result())
    _prefetched[_key(split)] = _prefetcher().submit(_load, split)


def _load(split: Split) -> Any:
    """The split's window, or the exception fetching it raised (the walk then fetches again and raises its own)."""
    from spark_jobs.remote import RemoteWindow

    try:
        return RemoteWindow(split.remote, split.segment, split.bound, _window_lo(split), split.end + TAIL_BYTES)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return exc


def _close(window: Any) -> None:
    if not isinstance(window, BaseException):
        window.close()


def _window(split: Split) -> Any:
    """The split's window: the prefetched one when there is one that worked, else fetched now."""
    from spark_jobs.remote import RemoteWindow

    _queued.pop(_key(split), None)  # fetched now, not ahead
    ahead = _prefetched.pop(_key(split), None)
    if ahead is not None:
        window = ahead.result()
        if not isinstance(window, BaseException):
            return window
    return RemoteWindow(split.remote, split.segment, split.bound, _window_lo(split), split.end + TAIL_BYTES)


def _fetch_more(buf: Any, hi: int, split: Split, stats: SplitStats) -> int | None:
    """Where the window must reach for the walk that gave ``stats`` to be the one the whole file gives, or
    None when it already is: the walk's stop (the next record's header and the record) must be fetched, and a
    STOP_END verdict looks at every byte to the bound."""
    if hi >= split.bound or stats.first < 0:
        return None  # no first record in the window: the chain check re-reads the segment whole if it matters
    pos = stats.last_end  # every answer below is past ``hi``: each round fetches more, up to the bound
    if pos + HEADER_SIZE > hi:
        return pos + HEADER_SIZE + TAIL_BYTES
    total = SIZE_MAGIC.unpack_from(buf, pos)[0]
    if FIXED_OVERHEAD <= total and pos + total > hi:
        return pos + total + TAIL_BYTES
    if stats.stop == STOP_END:
        return split.bound
    return None


def record_at(seg: Segment, pos: int) -> MessageRecord:
    """The record at ``pos`` of ``seg`` (from the file, or fetched: its header, then the rest), checked by the
    codec; raises ``CodecError`` (or ``ValueError``/``IndexError``) when there is none."""
    split = Split(0, seg.path, seg.file_from_offset, 0, seg.bound, seg.bound, seg.remote)
    if reads_locally(seg.remote, seg.path):
        buf = open_segment(seg.path, seg.bound)
        try:
            return decode_at(buf, pos, split)
        finally:
            buf.close()
    from spark_jobs.remote import RemoteWindow

    win = RemoteWindow(seg.remote, seg.name, seg.bound, pos, pos + HEADER_SIZE)
    try:
        total = SIZE_MAGIC.unpack_from(win.buf, 0)[0]
        win.extend(pos + max(total, 0))
        return decode_at(win.buf, 0, replace(split, file_from_offset=split.file_from_offset + pos,
                                              start=0, end=split.end - pos, bound=split.bound - pos))
    finally:
        win.close()
