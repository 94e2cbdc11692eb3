"""Read-ahead of cold sequential pulls (store/readahead.py): what is advised, and when nothing is.

``os.posix_fadvise`` is replaced by a recorder (the edge of the unit: advice changes no byte, so only the calls
can be checked); each call is recorded as (segment file path, start, end).
"""

from __future__ import annotations

import itertools
import os

import pytest

from broker_core.store import queue_reader, readahead
from broker_core.store.mapped_file_queue import MappedFileQueue
from broker_core.store.message import MessageInner

SEG = 64 * 1024
WINDOW = 16 * 1024


@pytest.fixture
def advised(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    calls: list[tuple[str, int, int]] = []

    def record(fd: int, offset: int, length: int, advice: int) -> None:
        assert advice == os.POSIX_FADV_WILLNEED
        calls.append((os.readlink(f"/proc/self/fd/{fd}"), offset, offset + length))

    monkeypatch.setattr(readahead.os, "posix_fadvise", record)
    monkeypatch.setattr(readahead, "HAVE_FADVISE", True)
    return calls


def queue_of(tmp_path, full: int, last_bytes: int) -> MappedFileQueue:  # type: ignore[no-untyped-def]
    """``full`` full segments of ``SEG`` bytes, then one holding ``last_bytes``."""
    mfq = MappedFileQueue(tmp_path / "q", SEG)
    for _ in range(full):
        assert mfq.get_last_mapped_file(0).append_bytes(b"r" * SEG)
    if last_bytes:
        assert mfq.get_last_mapped_file(0).append_bytes(b"r" * last_bytes)
    return mfq


def name(offset: int) -> str:
    return f"{offset:020d}"


def short(calls: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    return [(os.path.basename(f), start, end) for f, start, end in calls]


def global_ranges(calls: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    return [(int(f) + start, int(f) + end) for f, start, end in short(calls)]


def test_sequential_read_is_advised_once_per_window_across_segments(tmp_path, advised):  # type: ignore[no-untyped-def]
    mfq = queue_of(tmp_path, 3, 1000)
    pull = 1000
    for offset in range(0, 2 * SEG + SEG // 2, pull):
        readahead.read_ahead(mfq, offset, WINDOW)
        # each read was advised before it was made, with at least half a window beyond it
        # (ranges follow one another, checked below: the last one's end is how far ahead it goes)
        assert global_ranges(advised)[0][0] == 0 and global_ranges(advised)[-1][1] >= offset + WINDOW // 2
    ranges = global_ranges(advised)
    # no byte advised twice: the ranges follow one another
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert ranges[0][0] == 0 and ranges[-1][1] >= 2 * SEG + SEG // 2
    # one call per half window or so (plus one at each segment end), not one per pull
    pulls = (2 * SEG + SEG // 2) // pull
    assert len(advised) <= (2 * SEG + SEG // 2) // (WINDOW // 2) + 3 < pulls // 4
    # the window ran past the first segment's end into the next one before the read got there
    names = short(advised)
    assert names[[f for f, _, _ in names].index(name(SEG))][1] == 0
    mfq.close()


def test_nothing_past_the_written_end_and_nothing_for_tail_reads(tmp_path, advised):  # type: ignore[no-untyped-def]
    mfq = queue_of(tmp_path, 1, 20 * 1024)  # the active segment holds 20 KiB of 64
    end = SEG + 20 * 1024
    for offset in range(SEG - 8 * 1024, end, 512):
        readahead.read_ahead(mfq, offset, WINDOW)
    assert advised, "a read more than a window behind the end is advised"
    assert max(e for _, e in global_ranges(advised)) <= end
    # tail reads: within a window of the end, nothing is asked for
    advised.clear()
    for offset in range(end - WINDOW, end, 100):
        assert readahead.read_ahead(mfq, offset, WINDOW) == 0
    assert advised == []
    # advise_willneed itself clips to the written end
    mf = mfq.files[-1]
    mf.read_ahead_end = 0
    assert readahead.advise_willneed(mf, 0, SEG) == 20 * 1024
    assert short(advised) == [(name(SEG), 0, 20 * 1024)] and mf.read_ahead_end == 20 * 1024
    mfq.close()


def test_rewind_starts_the_window_again(tmp_path, advised):  # type: ignore[no-untyped-def]
    mfq = queue_of(tmp_path, 2, 0)
    for offset in range(0, SEG // 2, 1000):
        readahead.read_ahead(mfq, offset, WINDOW)
    advised.clear()
    assert readahead.read_ahead(mfq, 1000, WINDOW) == WINDOW  # a consumer reset back: advised again from there
    assert short(advised) == [(name(0), 1000, 1000 + WINDOW)]
    mfq.close()


def test_a_segment_retention_deleted_is_skipped(tmp_path, advised):  # type: ignore[no-untyped-def]
    mfq = queue_of(tmp_path, 3, 1000)
    first = mfq.files[0]
    assert first.destroy(0, 0)  # being deleted, still listed: hold() refuses it
    assert readahead.read_ahead(mfq, 100, WINDOW) == 0 and advised == []
    mfq.files = mfq.files[1:]  # retention removed it from the queue
    assert readahead.read_ahead(mfq, 100, WINDOW) == 0  # no segment there any more
    assert readahead.read_ahead(mfq, SEG + 100, WINDOW) == WINDOW
    assert short(advised) == [(name(SEG), 100, 100 + WINDOW)]
    mfq.close()


def fill(store, n: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        store.put_message(MessageInner("T", b"%06d" % i + b"." * 1000, 0))
    store.dispatch()


@pytest.mark.parametrize("enabled", [True, False])
def test_pulls_advise_the_commit_log_and_consume_queue_behind_the_end(open_store, advised, monkeypatch,  # type: ignore[no-untyped-def]
                                                                   enabled):
    monkeypatch.setattr(queue_reader, "COMMIT_LOG_WINDOW", WINDOW)
    monkeypatch.setattr(queue_reader, "CONSUME_QUEUE_WINDOW", 200)
    store = open_store(data_read_ahead_enable=enabled)
    fill(store, 300)  # ~5 CommitLog segments of 64 KiB, 6 ConsumeQueue files of 50 units
    offset, got = 0, 0
    while True:
        res = store.get_message("T", 0, offset, 32)
        if not res.messages:
            break
        got += len(res.messages)
        offset = res.next_begin_offset
    assert got == 300
    if not enabled:
        assert advised == []
        return
    cl_files = {str(mf.path.resolve()) for mf in store.commit_log.mapped_file_queue.files}
    cq_files = {str(mf.path.resolve()) for mf in store.consume_queue_table[("T", 0)].mapped_file_queue.files}
    assert len(cl_files) >= 5
    assert len({f for f, _, _ in advised if f in cl_files}) >= len(cl_files) - 1  # all but the tail's segment
    assert {f for f, _, _ in advised} & cq_files
    cl_ranges = global_ranges([c for c in advised if c[0] in cl_files])
    assert max(e for _, e in cl_ranges) < store.commit_log.max_offset()  # a read a window behind the end at most
