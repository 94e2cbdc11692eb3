"""Prefaulting the CommitLog (store/pages.py, store/prefault.py): ``populate_write`` in C and in Python give the
same answers and bring a fresh segment's pages into memory without changing a byte; a store with background
services has the pages past its write position in memory before the writer gets there; off at 0, and it stops
asking where the platform cannot."""

from __future__ import annotations

import ctypes
import errno
import itertools
import mmap
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker_core.config import BrokerConfig, ConfigError, StoreConfig
from broker_core.store import mapped_file, pages, prefault
from broker_core.store.message import MessageInner
from broker_core.store.prefault import PrefaultService

IMPLEMENTATIONS = [pages.py_populate_write]
READ_INS = [pages.py_read_in]
try:
    from broker_core.codec import _native
except ImportError:  # the extension is built by `make`; the pure twin is still checked
    pass
else:
    IMPLEMENTATIONS.append(_native.populate_write)
    READ_INS.append(_native.read_in)

SIZE = 1 << 20
PAGE = mmap.PAGESIZE


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[mmap.mmap]:
    """A fresh allocated file, mapped as a segment is (never written: its pages are not in memory yet)."""
    path = tmp_path / "00000000000000000000"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, SIZE)
    mm = mmap.mmap(fd, SIZE)
    os.close(fd)
    yield mm
    mm.close()


def resident(mm: mmap.mmap, start: int, length: int) -> list[bool]:
    """mincore(2): which pages of ``mm[start:start+length]`` are in memory (for a file: in the page cache)."""
    libc = ctypes.CDLL(None, use_errno=True)
    view = (ctypes.c_char * len(mm)).from_buffer(mm)
    try:
        vec = (ctypes.c_ubyte * ((length + PAGE - 1) // PAGE))()
        rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(view) + start), ctypes.c_size_t(length), vec)
        assert rc == 0, os.strerror(ctypes.get_errno())
        return [bool(v & 1) for v in vec]
    finally:
        del view


@pytest.mark.parametrize("populate", IMPLEMENTATIONS, ids=lambda f: "native" if f is not pages.py_populate_write
                         else "pure")
def test_populate_write_brings_pages_in_without_changing_a_byte(segment: mmap.mmap,
                                                                populate: Callable[..., bool]) -> None:
    if any(resident(segment, 0, SIZE)):
        pytest.skip("this file system keeps new files' pages in memory already (tmpfs?): nothing to observe")
    assert populate(segment, 100 * PAGE + 123, 24 * PAGE) is True  # widened to whole pages: 100..124
    assert all(resident(segment, 100 * PAGE, 25 * PAGE))
    assert segment[:] == bytes(SIZE)
    segment[5000:5011] = b"hello world"  # data under a populated range must survive
    assert populate(segment, 4000, 2 * PAGE) is True
    assert segment[5000:5011] == b"hello world"
    assert segment[:5000] == bytes(5000) and segment[5011:] == bytes(SIZE - 5011)


@pytest.mark.parametrize("populate", IMPLEMENTATIONS)
def test_populate_write_answers_the_same_at_the_edges(segment: mmap.mmap, populate: Callable[..., bool]) -> None:
    assert populate(segment, SIZE, 0) is True  # nothing to do
    assert populate(segment, SIZE - 1, 1) is True  # the last byte's page
    for start, length in ((-1, 10), (0, SIZE + 1), (SIZE + 1, 0), (10, -1)):
        with pytest.raises(ValueError, match="outside the buffer"):
            populate(segment, start, length)


def _wait(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_the_pages_past_the_write_position_are_in_memory_before_the_writer(open_store) -> None:  # type: ignore[no-untyped-def]
    ahead = 512 * 1024
    store = open_store(background=True, mapped_file_size_commit_log_bytes=4 * SIZE, prefault_ahead_bytes=ahead)
    assert store.put_message(MessageInner("Ahead", b"x" * 1000)).ok
    mf = store.commit_log.mapped_file_queue.last()
    wrote = mf.wrote_position
    _wait(lambda: mf.populated >= wrote + ahead - PAGE)
    gap = wrote + store.commit_log.prefault.gap  # the writer's next pages are left to it
    gap -= gap % PAGE
    assert all(resident(mf.mm, gap, wrote + ahead - PAGE - gap))
    assert mf.mv[wrote:wrote + ahead] == bytes(ahead)  # still zeros: nothing past the data was written
    assert store.get_message("Ahead", 0, 0, 1).messages[0].body == b"x" * 1000
    # the writer moving on past half the window asks for more: at least half a window stays ahead of it
    for _ in range(400):
        assert store.put_message(MessageInner("Ahead", b"y" * 1000)).ok
    wrote = mf.wrote_position
    assert wrote > ahead // 2
    _wait(lambda: mf.populated >= wrote + ahead // 2)
    assert mf.populated <= mf.file_size


def test_zero_turns_it_off(open_store) -> None:  # type: ignore[no-untyped-def]
    store = open_store(background=True, prefault_ahead_bytes=0)
    assert store.put_message(MessageInner("Off", b"x")).ok
    assert store.commit_log.prefault is None
    assert store.commit_log.mapped_file_queue.last().populated == 0
    with pytest.raises(ConfigError, match="prefaultAheadBytes"):
        BrokerConfig(store=StoreConfig(prefault_ahead_bytes=-1)).validate()


def test_where_the_platform_cannot_it_stops_asking(open_store, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def cannot(buf: mmap.mmap, start: int, length: int) -> bool:
        calls.append(start)
        return False

    monkeypatch.setattr(mapped_file, "populate_write", cannot)
    store = open_store(background=True, commit_log_write_mode="mmap",
                       mapped_file_size_commit_log_bytes=4 * SIZE, prefault_ahead_bytes=1 << 16)
    assert store.put_message(MessageInner("No", b"x")).ok
    _wait(lambda: store.commit_log.prefault is not None and store.commit_log.prefault.stopped)
    for _ in range(300):  # far past the window: nothing asks again
        assert store.put_message(MessageInner("No", b"y" * 1000)).ok
    assert len(calls) == 1 and store.commit_log._prefault_ahead == 0


def test_a_request_is_populated_in_one_call_up_to_the_chunk(open_store, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Each call hands the GIL back and waits to retake it (up to the 5 ms switch interval in-process): a window
    cut into small calls fell behind a batched writer. Fails with the former 256 KiB calls."""
    calls: list[tuple[int, int]] = []
    real = mapped_file.populate_write

    def counting(buf: mmap.mmap, start: int, length: int) -> bool:
        calls.append((start, length))
        return real(buf, start, length)

    monkeypatch.setattr(mapped_file, "populate_write", counting)
    ahead = 2 * SIZE
    store = open_store(background=True, commit_log_write_mode="mmap",
                       mapped_file_size_commit_log_bytes=16 * SIZE, prefault_ahead_bytes=ahead)
    assert store.put_message(MessageInner("Whole", b"x" * 1000)).ok
    mf = store.commit_log.mapped_file_queue.last()
    _wait(lambda: mf.populated >= mf.wrote_position + ahead - PAGE)
    assert len(calls) == 1, calls
    assert calls[0][1] > ahead - store.commit_log.prefault.gap - 2 * PAGE


def test_the_writer_asks_once_a_half_window_while_the_thread_lags() -> None:
    """``wanted`` compares with the end last asked for, not the end reached: a thread that has not populated
    anything yet (here: not started) is asked once per half window, not after every put."""
    ahead = 1 << 20
    pf = PrefaultService(ahead)
    mf = SimpleNamespace(wrote_position=0, populated=0, prefault_end=0, file_size=8 * ahead)
    asked = []
    while mf.wrote_position < mf.file_size:
        mf.wrote_position += 1024
        if pf.wanted(mf):
            pf.request(mf)
            asked.append(mf.wrote_position)
    assert mf.populated == 0 and mf.prefault_end == mf.file_size
    assert 14 <= len(asked) <= 17  # about file_size / (ahead / 2)
    assert all(b - a >= ahead // 2 - 1024 for a, b in itertools.pairwise(asked))


def _vm_flags(path: Path) -> set[str] | None:
    """The VmFlags of this process's mapping of ``path`` (/proc/self/smaps), None when it is not mapped."""
    flags = None
    current = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):  # a mapping's first line
            current = line.rstrip().endswith(str(path))
        elif current and line.startswith("VmFlags:"):
            flags = set(line.split()[1:])
    return flags


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux only")
def test_readahead_is_off_on_the_segment_being_populated_and_back_on_after(open_store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """MADV_RANDOM ("rr" in VmFlags) on the segment the thread populates, MADV_NORMAL again once it is done with it,
    on a device that reads ahead megabytes: a populating fault would read ahead, zeroing large folios in one
    unpreemptible stretch."""
    monkeypatch.setattr(prefault, "device_readahead_kb", lambda path: 8192)  # this VM's disk
    ahead = 512 * 1024
    store = open_store(background=True, commit_log_write_mode="mmap",
                       mapped_file_size_commit_log_bytes=4 * SIZE, prefault_ahead_bytes=ahead)
    assert store.put_message(MessageInner("Advice", b"x" * 1000)).ok
    mf = store.commit_log.mapped_file_queue.last()
    _wait(lambda: mf.populated > 0)
    flags = _vm_flags(mf.path)
    assert flags is not None and "rr" in flags
    assert store.get_message("Advice", 0, 0, 1).messages[0].body == b"x" * 1000  # reads are not affected
    store.commit_log.prefault.shutdown()
    flags = _vm_flags(mf.path)
    assert flags is not None and "rr" not in flags


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux only")
def test_readahead_stays_on_where_the_device_reads_ahead_little(open_store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(prefault, "device_readahead_kb", lambda path: 128)  # most disks
    store = open_store(background=True, commit_log_write_mode="mmap",
                       mapped_file_size_commit_log_bytes=4 * SIZE, prefault_ahead_bytes=512 * 1024)
    assert store.put_message(MessageInner("Advice", b"x" * 1000)).ok
    mf = store.commit_log.mapped_file_queue.last()
    _wait(lambda: mf.populated > 0)
    flags = _vm_flags(mf.path)
    assert flags is not None and "rr" not in flags


def test_the_device_readahead_is_read_from_sysfs(tmp_path: Path) -> None:
    """The disk's queue, a partition's parent disk's queue, the backing device's; None where none answers."""
    target = tmp_path / "file"
    target.write_bytes(b"x")
    st = os.stat(target)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sys_root = tmp_path / "sys"
    assert pages.device_readahead_kb(target, sys_root) is None
    bdi = sys_root / "class" / "bdi" / dev
    bdi.mkdir(parents=True)
    (bdi / "read_ahead_kb").write_text("512\n")
    assert pages.device_readahead_kb(target, sys_root) == 512
    disk = sys_root / "devices" / "vda"
    (disk / "vda1").mkdir(parents=True)
    (disk / "queue").mkdir()
    (disk / "queue" / "read_ahead_kb").write_text("8192\n")
    (sys_root / "dev" / "block").mkdir(parents=True)
    (sys_root / "dev" / "block" / dev).symlink_to(disk / "vda1")  # a partition: its disk's queue
    assert pages.device_readahead_kb(target, sys_root) == 8192
    (disk / "vda1" / "queue").mkdir()
    (disk / "vda1" / "queue" / "read_ahead_kb").write_text("128\n")
    assert pages.device_readahead_kb(target, sys_root) == 128
    assert pages.device_readahead_kb(tmp_path / "missing", sys_root) is None


def test_a_staged_segment_is_read_in_not_faulted_in(open_store, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """commitLogWriteMode=pwrite: the writer's pages come into the page cache by posix_fadvise(WILLNEED) on the
    descriptor (clean zeros), never by a writable fault of the mapping (every such page would be cleaned with a
    TLB shootdown at each flush)."""
    faulted: list[int] = []
    read: list[tuple[int, int]] = []
    real = mapped_file.read_in

    def reading(fd: int, start: int, length: int) -> bool:
        read.append((start, length))
        return real(fd, start, length)

    monkeypatch.setattr(mapped_file, "populate_write", lambda buf, start, length: faulted.append(start) or True)
    monkeypatch.setattr(mapped_file, "read_in", reading)
    ahead = 2 * SIZE
    store = open_store(background=True, mapped_file_size_commit_log_bytes=16 * SIZE, prefault_ahead_bytes=ahead)
    assert store.put_message(MessageInner("Staged", b"x" * 1000)).ok
    mf = store.commit_log.mapped_file_queue.last()
    assert mf.staged
    _wait(lambda: mf.populated >= mf.wrote_position + ahead - PAGE)
    assert read and not faulted
    assert read[0][0] >= mf.wrote_position - mf.wrote_position % PAGE
    assert store.get_message("Staged", 0, 0, 1).messages[0].body == b"x" * 1000


@pytest.mark.parametrize("read_in", READ_INS, ids=lambda f: "native" if f is not pages.py_read_in else "pure")
def test_read_in_brings_pages_into_the_page_cache_without_changing_a_byte(tmp_path: Path,
                                                                         read_in: Callable[..., bool]) -> None:
    """posix_fadvise(WILLNEED) on the descriptor: the allocated, unwritten pages come in (mincore sees them through
    a mapping of the same file), as zeros; a range over several slices comes in whole, a byte written stays."""
    fd = os.open(tmp_path / "00000000000000000000", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, SIZE)
        os.pwrite(fd, b"hello", 3 * pages.SLICE + 7)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, SIZE, os.POSIX_FADV_DONTNEED)  # the written page out of the cache again
        mm = mmap.mmap(fd, SIZE)
        if any(resident(mm, 0, SIZE)):
            pytest.skip("this file system keeps new files' pages in memory already (tmpfs?): nothing to observe")
        assert read_in(fd, 40 * PAGE, 16 * PAGE) is True
        assert read_in(fd, PAGE, 0) is True
        many = (2 * pages.SLICE, 3 * pages.SLICE + PAGE)  # three slices and a page: each step's range taken
        assert read_in(fd, many[0], many[1]) is True
        deadline = time.monotonic() + 5  # WILLNEED may start the reads and return
        while not (all(resident(mm, 40 * PAGE, 16 * PAGE)) and all(resident(mm, *many))) and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(resident(mm, 40 * PAGE, 16 * PAGE)) and all(resident(mm, *many))
        assert not any(resident(mm, 0, PAGE))  # only what was asked for (and the kernel's readahead, not below)
        expected = bytearray(SIZE)
        expected[3 * pages.SLICE + 7:3 * pages.SLICE + 12] = b"hello"
        assert mm[:] == expected
        mm.close()
    finally:
        os.close(fd)


@pytest.mark.parametrize("read_in", READ_INS)
def test_read_in_answers_the_same_for_bad_arguments(tmp_path: Path, read_in: Callable[..., bool]) -> None:
    """Both twins: ValueError for a negative start or length, the kernel's EBADF as OSError for a closed file."""
    for start, length in ((-1, 10), (0, -1)):
        with pytest.raises(ValueError, match="negative start or length"):
            read_in(0, start, length)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
    with pytest.raises(OSError) as info:
        read_in(fd, 0, PAGE)
    assert info.value.errno == errno.EBADF
