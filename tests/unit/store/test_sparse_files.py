"""Store files are sparse: a queue with one message costs a page of disk, a fresh store almost nothing, and a hole
reads (and recovers) as the zeroed tail it replaces. Sizes are real blocks (``st_blocks * 512``), not lengths."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import time
from pathlib import Path

import pytest

from broker_core.config import BrokerConfig
from broker_core.store import GetStatus, MessageStore, PutStatus, mapped_file
from broker_core.store.allocate import AllocateMappedFileService
from broker_core.store.mapped_file import MappedFile, allocated_bytes
from broker_core.store.message import MessageInner

KIB, MIB = 1024, 1024 * 1024
TOPICS, QUEUES = 16, 8  # 128 queues here (the fast loop); tests/integration/test_sparse_store.py: 800 on a broker
SEGMENT = MIB  # the recovery test's CommitLog segment


def _blocks(root: Path) -> int:
    return sum(allocated_bytes(p) for p in root.rglob("*") if p.is_file())


def _default_store(tmp_path: Path) -> MessageStore:
    """A store with the broker's default file sizes (1 GiB segments, 6,000,000-byte ConsumeQueue files, 5M-slot
    IndexFiles) and its background services (allocator, prefault thread, dispatcher, flushers), as a broker runs."""
    return MessageStore(BrokerConfig().with_store_dir(tmp_path / "store").validate()).start()


def test_a_fresh_store_and_many_queues_of_one_message_take_little_disk(tmp_path: Path) -> None:
    store = _default_store(tmp_path)
    root = tmp_path / "store"
    try:
        fresh = _blocks(root)
        assert fresh < 64 * MIB, f"a fresh store takes {fresh} bytes of disk"
        for t in range(TOPICS):
            for q in range(QUEUES):
                assert store.put_message(MessageInner(f"Sparse{t}", b"x" * 100, q, keys=f"k{t}-{q}")).ok
        assert store.dispatch(timeout=120)  # a ConsumeQueue file per queue, each with its directory fsynced
        cq_files = sorted((root / "consumequeue").rglob("0" * 20))
        assert len(cq_files) == TOPICS * QUEUES
        for path in cq_files:
            assert path.stat().st_size == 6_000_000  # the queue's length is RocketMQ's ...
            assert allocated_bytes(path) < 64 * KIB, f"{path} takes {allocated_bytes(path)} bytes of disk"
        index = [p for p in (root / "index").iterdir() if p.is_file()]
        assert index and all(allocated_bytes(p) < 64 * MIB for p in index)
        total = _blocks(root)
        assert total < 64 * MIB, f"the store takes {total} bytes of disk after {TOPICS * QUEUES} messages"
        assert store.get_message(f"Sparse{TOPICS - 1}", QUEUES - 1, 0, 1).status is GetStatus.FOUND
    finally:
        store.shutdown()


@pytest.mark.parametrize("warm", [False, True])
def test_the_segment_allocated_ahead_is_written_only_when_warm(tmp_path: Path, warm: bool) -> None:
    size = 8 * MIB
    allocator = AllocateMappedFileService(warm)
    try:
        first = allocator(tmp_path / f"{0:020d}", tmp_path / f"{size:020d}", size)
        allocator.wait_idle()
        ahead = tmp_path / f"{size:020d}"
        assert ahead.stat().st_size == size
        assert allocated_bytes(first.path) == 0  # created by the writer's ask: never warmed
        if warm:
            assert allocated_bytes(ahead) >= size  # warmMapedFileEnable: written whole with zeros, as upstream
        else:
            assert allocated_bytes(ahead) == 0
        first.close()
    finally:
        allocator.shutdown()


def test_reserve_takes_blocks_without_changing_a_byte(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 4 * MIB, create=True)
    try:
        assert allocated_bytes(mf.path) == 0
        mf.reserve(MIB)
        assert MIB <= allocated_bytes(mf.path) < 2 * MIB and mf.reserved == MIB
        mf.reserve(MIB // 2)  # below what is reserved: nothing to do
        assert mf.reserved == MIB
        assert not any(mf.mv[:4 * MIB])
    finally:
        mf.close()


def test_the_commit_log_takes_disk_only_a_window_ahead_of_the_writer(open_store) -> None:  # type: ignore[no-untyped-def]
    ahead = 2 * MIB
    store = open_store(background=True, mapped_file_size_commit_log_bytes=64 * MIB, prefault_ahead_bytes=ahead)
    assert store.put_message(MessageInner("Window", b"x" * 1000)).ok
    mf = store.commit_log.mapped_file_queue.last()
    deadline = time.monotonic() + 60
    while mf.populated < mf.wrote_position + ahead - 4096 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mf.reserved == mf.wrote_position + ahead  # the prefault thread reserved its window, no more
    assert ahead <= allocated_bytes(mf.path) <= ahead + 64 * KIB
    ahead_segment = mf.path.with_name(f"{64 * MIB:020d}")
    store.allocator.wait_idle()
    assert ahead_segment.exists() and allocated_bytes(ahead_segment) == 0  # allocated ahead, not written through


def test_no_space_for_the_window_refuses_puts_before_the_writer_reaches_a_hole(
        open_store, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    def no_space(self: MappedFile, end: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(MappedFile, "reserve", no_space)
    store = open_store(background=True, mapped_file_size_commit_log_bytes=64 * MIB, prefault_ahead_bytes=2 * MIB)
    assert store.put_message(MessageInner("Full", b"x" * 1000)).ok
    deadline = time.monotonic() + 60
    while not store.disk_full and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.disk_full
    refused = store.put_message(MessageInner("Full", b"y" * 1000))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE and "disk full" in refused.error


@pytest.mark.parametrize("disk_full", [False, True])
def test_a_failed_pwrite_reserves_the_blocks_before_copying_through_the_mapping(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disk_full: bool) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", MIB, create=True)
    try:
        mf.stage()
        assert mf.staged
        mf.wv[:5] = b"hello"

        def no_pwrite(*_: object) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        real_fallocate = os.posix_fallocate

        def fallocate(fd: int, offset: int, length: int) -> None:
            if disk_full:
                raise OSError(errno.ENOSPC, "No space left on device")
            real_fallocate(fd, offset, length)

        monkeypatch.setattr(mapped_file.os, "pwrite", no_pwrite)
        monkeypatch.setattr(mapped_file.os, "posix_fallocate", fallocate)
        if disk_full:  # an error for the put, never a store into a hole (a SIGBUS on a full disk)
            with pytest.raises(OSError):
                mf.commit(0, 5)
            assert allocated_bytes(mf.path) == 0 and mf.mv[:5] == bytes(5)
        else:
            mf.commit(0, 5)
            assert mf.mv[:5] == b"hello" and not mf.staged and allocated_bytes(mf.path) > 0
    finally:
        mf.close()


def _punch_hole(path: Path, start: int, length: int) -> None:
    """Deallocate ``[start, start+length)`` (``fallocate(PUNCH_HOLE | KEEP_SIZE)``): it reads as zeros after."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = os.open(path, os.O_RDWR)
    try:
        if libc.fallocate(fd, 0x02 | 0x01, ctypes.c_long(start), ctypes.c_long(length)) != 0:
            err = ctypes.get_errno()
            pytest.skip(f"the file system cannot punch holes ({os.strerror(err)})")
    finally:
        os.close(fd)


def _bodies(store: MessageStore) -> list[bytes]:
    out = []
    for qid in range(3):
        offset = 0
        while True:
            res = store.get_message("T", qid, offset, 32)
            if res.status is not GetStatus.FOUND:
                break
            out.extend(m.body[:9] for m in res.messages)
            offset = res.next_begin_offset
    return sorted(out)


@pytest.mark.parametrize("abnormal", [False, True])
def test_recovery_takes_a_hole_for_the_end_of_data(open_store, clock, tmp_path: Path, abnormal: bool) -> None:  # type: ignore[no-untyped-def]
    store = open_store(mapped_file_size_commit_log_bytes=SEGMENT)
    results = [store.put_message(MessageInner("T", b"msg-%05d" % i + b"." * 500, i % 3, keys=f"k{i}"))
               for i in range(1000)]
    assert store.dispatch()
    cfg = store.config
    store.shutdown()
    seg = tmp_path / "store" / "commitlog" / f"{0:020d}"
    before = allocated_bytes(seg)
    # the pages from inside record 900 on never reached the disk: a hole to the segment's end
    victim = results[900]
    hole_at = victim.phy_offset - victim.phy_offset % 4096 + 4096
    _punch_hole(seg, hole_at, SEGMENT - hole_at)
    assert allocated_bytes(seg) < before
    cut = max(r.phy_offset for r in results if r.phy_offset + r.size <= hole_at)
    first_lost = min(r.phy_offset for r in results if r.phy_offset > cut)
    kept = [i for i, r in enumerate(results) if r.phy_offset <= cut]
    if abnormal:
        (tmp_path / "store" / "abort").touch()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert again.commit_log.max_offset() == first_lost
        assert _bodies(again) == sorted(b"msg-%05d" % i for i in kept)
        assert again.query_message("T", f"k{kept[-1] + 1}").messages == []
        assert len(again.query_message("T", f"k{kept[-1]}").messages) == 1
        r = again.put_message(MessageInner("T", b"after", 0))
        assert r.ok and r.phy_offset == first_lost
        assert r.queue_offset == sum(1 for i in kept if i % 3 == 0)
    finally:
        again.shutdown()


def test_a_consume_queue_with_a_hole_over_its_tail_is_replayed(open_store, clock, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = open_store(mapped_file_size_consume_queue_bytes=20 * 1024)
    for i in range(600):
        assert store.put_message(MessageInner("T", b"msg-%05d" % i, 0)).ok
    assert store.dispatch()
    cfg = store.config
    store.shutdown()
    cq = tmp_path / "store" / "consumequeue" / "T" / "0" / f"{0:020d}"
    _punch_hole(cq, 4096, 20 * 1024 - 4096)  # units 205.. lost (a crash before their pages were written back)
    (tmp_path / "store" / "abort").touch()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        again.dispatch()
        assert again.get_max_offset_in_queue("T", 0) == 600
        res = again.get_message("T", 0, 300, 1)
        assert res.status is GetStatus.FOUND and res.messages[0].body == b"msg-00300"
    finally:
        again.shutdown()
