"""commitLogWriteMode=pwrite (store/mapped_file.py ``stage``/``commit``, the C put path's ``pwrite``): appends are
written into a staging buffer and ``pwrite`` into the file before the write position moves; the file holds the
same bytes as when they are stored through the mapping, and a failed ``pwrite`` falls back to the mapping.
``pages.sync_range`` (the flush) in C and in Python: the same answers, the bytes on disk."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker_core.store import pages
from broker_core.store.mapped_file import STAGE_RELEASE, MappedFile, offset_to_file_name
from broker_core.store.message import MessageInner
from tests.plugins.stores import records_written

SYNCS: list[Callable[..., None]] = [pages.py_sync_range]
try:
    from broker_core.codec import _native

    SYNCS.append(_native.sync_range)
except ImportError:  # the pure-Python run: only the pure twin
    pass
PAGE = mmap.PAGESIZE


def segment(tmp_path: Path, size: int = 4 * STAGE_RELEASE) -> MappedFile:
    return MappedFile(tmp_path / offset_to_file_name(0), size, create=True)


def test_commit_puts_the_staged_bytes_into_the_file_and_gives_staging_back(tmp_path: Path) -> None:
    mf = segment(tmp_path)
    mf.stage()
    assert mf.staged and mf.wv is not mf.mv and mf.released == 0
    data = os.urandom(STAGE_RELEASE + 3 * PAGE + 100)
    mf.wv[:len(data)] = data
    assert bytes(mf.mv[:16]) == bytes(16)  # staged, not yet in the file
    mf.commit(0, len(data))
    mf.wrote_position = len(data)
    assert bytes(mf.mv[:len(data)]) == data and os.pread(mf.fd, len(data), 0) == data
    assert mf.released == STAGE_RELEASE  # whole steps below the end
    assert bytes(mf.wv[:PAGE]) == bytes(PAGE)  # given back: the kernel's zeros again
    mf.wv[len(data):len(data) + 5] = b"hello"
    mf.commit(len(data), len(data) + 5)
    assert bytes(mf.mv[len(data):len(data) + 5]) == b"hello"
    mf.close()


def test_a_full_segment_is_unstaged_and_never_staged_again(tmp_path: Path) -> None:
    mf = segment(tmp_path, 2 * PAGE)
    mf.stage()
    mf.wv[:2 * PAGE] = b"z" * 2 * PAGE
    mf.commit(0, 2 * PAGE)
    assert not mf.staged and mf.wv is mf.mv
    mf.wrote_position = 2 * PAGE
    mf.stage()
    assert not mf.staged
    assert bytes(mf.mv) == b"z" * 2 * PAGE
    mf.close()


def test_a_failed_pwrite_goes_through_the_mapping_and_unstages(tmp_path: Path, caplog: Any) -> None:
    mf = segment(tmp_path)
    mf.stage()
    good = mf.fd
    mf.fd = os.open(mf.path, os.O_RDONLY)  # pwrite fails with EBADF
    try:
        mf.wv[:6] = b"abcdef"
        mf.commit(0, 6)
    finally:
        os.close(mf.fd)
        mf.fd = good
    assert bytes(mf.mv[:6]) == b"abcdef" and not mf.staged
    assert "appends go through the mapping" in caplog.text
    mf.stage()  # "from now on": not staged again
    assert not mf.staged
    mf.close()


def test_the_c_put_falls_back_the_same_way(open_store: Any) -> None:
    native = pytest.importorskip("broker_core.codec._native")
    from broker_core.store import PutStatus
    from broker_core.store.clock import Clock
    from broker_core.store.results import PutMessageResult

    store = open_store()
    cl = store.commit_log
    cl.clock = Clock()  # the wall clock: put_single takes the message itself (a ManualClock sends it the batch way)
    assert store.put_message(MessageInner("T", b"first")).ok
    mf = cl.mapped_file_queue.last()
    assert mf.staged
    good = mf.fd
    mf.fd = os.open(mf.path, os.O_RDONLY)
    try:
        r = native.put_single(cl, MessageInner("T", b"second"), PutStatus.PUT_OK, PutMessageResult)
    finally:
        os.close(mf.fd)
        mf.fd = good
    assert r is not None and r.ok and not mf.staged
    assert [m.body for m in store.get_message("T", 0, 0, 10).messages] == [b"first", b"second"]


def test_both_write_modes_store_the_same_bytes_and_recover_them(open_store: Any, tmp_path: Path) -> None:
    msgs = [MessageInner("Same", os.urandom(n % 900 + 1), n % 4, keys=f"k{n}") for n in range(300)]
    stores = {}
    for mode in ("pwrite", "mmap"):
        store = open_store(store_dir=tmp_path / mode, commit_log_write_mode=mode,
                           mapped_file_size_commit_log_bytes=64 * 1024)
        for i in range(0, 100):
            assert store.put_message(msgs[i]).ok
        assert all(r.ok for r in store.put_messages(msgs[100:200]))
        for m in msgs[200:]:
            assert store.put_message(m).ok
        assert store.dispatch(timeout=10)
        stores[mode] = store
    assert stores["pwrite"].commit_log.mapped_file_queue.last().staged
    assert not stores["mmap"].commit_log.mapped_file_queue.last().staged
    assert len(stores["pwrite"].commit_log.mapped_file_queue.files) >= 2  # rolled over segments
    assert records_written(stores["pwrite"]) == records_written(stores["mmap"])
    store = stores["pwrite"]
    store.flush()
    end = store.commit_log.max_offset()
    store.shutdown()
    again = open_store(store_dir=tmp_path / "pwrite", commit_log_write_mode="pwrite",
                       mapped_file_size_commit_log_bytes=64 * 1024)
    assert again.commit_log.max_offset() == end and again.commit_log.mapped_file_queue.last().staged
    got = [m.body for q in range(4) for offset in range(0, 75, 25)
           for m in again.get_message("Same", q, offset, 25).messages]
    assert sorted(got) == sorted(m.body for m in msgs)


@pytest.mark.parametrize("sync", SYNCS, ids=lambda f: "pure" if f is pages.py_sync_range else "native")
def test_sync_range_answers_the_same_at_the_edges(tmp_path: Path, sync: Callable[..., None]) -> None:
    mf = segment(tmp_path, 4 * PAGE)
    mf.mv[:10] = b"0123456789"
    sync(mf.mm, 3, 7)  # an unaligned start: widened down to its page
    sync(mf.mm, 4 * PAGE, 0)
    sync(mf.mm, 0, 4 * PAGE)
    for start, length in ((-1, 1), (0, 4 * PAGE + 1), (4 * PAGE + 1, 0), (2, -1)):
        with pytest.raises(ValueError, match="outside the buffer"):
            sync(mf.mm, start, length)
    assert os.pread(mf.fd, 10, 0) == b"0123456789"
    mf.close()


def test_without_a_staging_buffer_appends_go_through_the_mapping(open_store: Any, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: Any) -> None:
    """The kernel refuses the buffer (strict overcommit): the segment stays unstaged, said once in the log, and
    puts are stored through the mapping as in mmap mode."""
    from broker_core.store import mapped_file

    def refused(size: int) -> mmap.mmap:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(mapped_file, "staging_buffer", refused)
    store = open_store(mapped_file_size_commit_log_bytes=64 * 1024)
    for _ in range(3):  # the batch way asks to stage the last segment at each call: it is not asked again
        assert store.put_message(MessageInner("NoStage", b"x" * 100)).ok
    mf = store.commit_log.mapped_file_queue.last()
    assert not mf.staged and mf.unstageable and mf.wv is mf.mv
    assert caplog.text.count("no staging buffer") == 1
    assert store.get_message("NoStage", 0, 0, 1).messages[0].body == b"x" * 100


@pytest.mark.parametrize("fail", [False, True], ids=["pwritev", "failed-pwritev"])
def test_the_c_put_writes_a_large_body_from_its_bytes(open_store: Any, tmp_path: Path, fail: bool) -> None:
    """A staged C put writes a body from 64 KiB (BODY_APART_MIN) straight from the message's bytes (pwritev of
    header, body, tail), not through the staging buffer: the file holds the same records, whose CRC recovery checks
    on reopening; a failed write falls back through the mapping with the body in place."""
    native = pytest.importorskip("broker_core.codec._native")
    from broker_core.store import PutStatus
    from broker_core.store.clock import Clock
    from broker_core.store.results import PutMessageResult

    store = open_store(store_dir=tmp_path / "s", mapped_file_size_commit_log_bytes=1024 * 1024)
    cl = store.commit_log
    cl.clock = Clock()
    bodies = [os.urandom(n) for n in (64 * 1024 - 1, 64 * 1024, 300_001, 5)]
    assert store.put_message(MessageInner("Big", b"first")).ok
    mf = cl.mapped_file_queue.last()
    assert mf.staged
    good = mf.fd
    if fail:
        mf.fd = os.open(mf.path, os.O_RDONLY)
    try:
        for body in bodies:
            r = native.put_single(cl, MessageInner("Big", body, keys="k"), PutStatus.PUT_OK, PutMessageResult)
            assert r is not None and r.ok
    finally:
        if fail:
            os.close(mf.fd)
            mf.fd = good
    assert mf.staged != fail
    want = [b"first", *bodies]
    assert [m.body for m in store.get_message("Big", 0, 0, 10).messages] == want
    end = cl.max_offset()
    assert os.pread(mf.fd, end, 0) == bytes(mf.mv[:end])  # the file, not only the mapping's view of it
    store.flush()
    store.shutdown()
    again = open_store(store_dir=tmp_path / "s", mapped_file_size_commit_log_bytes=1024 * 1024)
    assert again.commit_log.max_offset() == end  # every record's CRC held
    assert [m.body for m in again.get_message("Big", 0, 0, 10).messages] == want
