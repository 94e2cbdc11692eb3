from __future__ import annotations

import os
import time

import pytest

from broker_core.store.errors import StoreError
from broker_core.store.mapped_file import MappedFile, offset_to_file_name
from broker_core.store.mapped_file_queue import MappedFileQueue


def test_file_name_and_positions(tmp_path):
    assert offset_to_file_name(1073741824) == "00000000001073741824"
    mf = MappedFile(tmp_path / offset_to_file_name(8192), 8192, create=True)
    assert mf.file_from_offset == 8192 and os.path.getsize(mf.path) == 8192
    assert mf.append_bytes(b"x" * 100)
    assert (mf.wrote_position, mf.flushed_position) == (100, 0)
    assert mf.flush(least_pages=1) == 0  # less than a page dirty
    assert mf.flush(0) == 100
    assert mf.read(0, 100) == b"x" * 100
    assert mf.read(50, 51) is None  # past the read position
    assert not mf.append_bytes(b"y" * 8093)
    mf.close()


def test_refcount_postpones_destroy(tmp_path):
    mf = MappedFile(tmp_path / offset_to_file_name(0), 4096, create=True)
    mf.append_bytes(b"abc")
    view = mf.select(0)
    assert view is not None and bytes(view.buffer) == b"abc"
    assert not mf.destroy(interval_forcibly_ms=1000, now_ms=0)
    assert mf.path.exists()
    assert mf.select(0) is None  # no new readers once shutdown started
    view.release()
    assert mf.destroy(1000, 10)
    assert not mf.path.exists()


def test_forced_destroy_after_interval(tmp_path):
    mf = MappedFile(tmp_path / offset_to_file_name(0), 4096, create=True)
    mf.append_bytes(b"abc")
    view = mf.select(0)
    assert not mf.destroy(1000, 0)
    assert mf.destroy(1000, 1000)  # forced: a reader that never lets go cannot pin the file
    assert not mf.path.exists()
    view.release()


def test_queue_lookup_with_first_file_not_at_zero(tmp_path):
    mfq = MappedFileQueue(tmp_path, 4096)
    for _ in range(4):
        mf = mfq.get_last_mapped_file(0)
        mf.append_bytes(b"z" * 4096)
    assert [m.file_from_offset for m in mfq.files] == [0, 4096, 8192, 12288]
    mfq.files[0].destroy(0, 0)
    mfq.files = mfq.files[1:]
    assert mfq.min_offset() == 4096
    assert mfq.find_mapped_file_by_offset(9000).file_from_offset == 8192
    assert mfq.find_mapped_file_by_offset(100) is None
    assert mfq.find_mapped_file_by_offset(100, return_first_on_not_found=True).file_from_offset == 4096
    assert mfq.find_mapped_file_by_offset(16384) is None
    assert mfq.max_offset() == 16384


def test_load_checks_sizes_and_contiguity(tmp_path):
    mfq = MappedFileQueue(tmp_path, 4096)
    mfq.get_last_mapped_file(0).append_bytes(b"a" * 4096)
    mfq.get_last_mapped_file(0)
    mfq.close()
    (tmp_path / "00000000000000004096.tmp").write_bytes(b"")
    again = MappedFileQueue(tmp_path, 4096)
    again.load()
    assert len(again.files) == 2 and not (tmp_path / "00000000000000004096.tmp").exists()
    again.close()
    # renamed out of the way at once, unlinked on a thread; a renamed file an earlier crash left is removed too
    (tmp_path / "00000000000000008192.tmp.discard").write_bytes(b"")
    third = MappedFileQueue(tmp_path, 4096)
    third.load()
    assert len(third.files) == 2
    third.close()
    deadline = time.monotonic() + 10
    while list(tmp_path.glob("*.discard")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000", "00000000000000004096"]
    with pytest.raises(StoreError, match="configured size"):
        MappedFileQueue(tmp_path, 8192).load()
    os.unlink(tmp_path / "00000000000000004096")
    (tmp_path / offset_to_file_name(12288)).write_bytes(b"\0" * 4096)
    with pytest.raises(StoreError, match="contiguous"):
        MappedFileQueue(tmp_path, 4096).load()


def test_find_by_time(tmp_path):
    mfq = MappedFileQueue(tmp_path, 4096)
    for i in range(3):
        mf = mfq.get_last_mapped_file(0)
        mf.append_bytes(b"q" * 4096)
        os.utime(mf.path, (1000 * (i + 1), 1000 * (i + 1)))
    assert mfq.get_mapped_file_by_time(1_500_000).file_from_offset == 4096
    assert mfq.get_mapped_file_by_time(9_000_000).file_from_offset == 8192
    mfq.close()
