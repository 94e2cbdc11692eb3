"""Durability in-process: directory fsyncs for new files, the flush-failure latch, flushed checkpoint times."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.codec.config_file import write_config_file
from broker_core.store import MessageStore, PutStatus, durability
from broker_core.store.flush import flush_commit_log
from broker_core.store.mapped_file import MappedFile
from broker_core.store.message import MessageInner


def _wait(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return False


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` was called on during the test (a spy at the edge; the real fsync still runs)."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


@pytest.fixture
def eio() -> Iterator[None]:
    yield
    durability.inject_fsync_failure(None)


def test_a_new_segment_fsyncs_its_directory_and_every_directory_created_for_it(tmp_path, fsynced):
    seg = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    MappedFile(seg, 4096, create=True).close()
    assert str(seg.parent) in fsynced  # the new name
    for created in (seg.parent, seg.parent.parent, seg.parent.parent.parent):
        assert str(created.parent) in fsynced  # each new directory's name
    assert not list(seg.parent.glob("*.tmp"))


def test_state_files_are_fsynced_with_their_directory(tmp_path, fsynced):
    path = tmp_path / "config" / "topics.json"
    write_config_file(path, '{"a": 1}')
    write_config_file(path, '{"a": 2}')
    assert str(path.with_name("topics.json.tmp")) in fsynced or str(path) in fsynced  # the data (fd opened as .tmp)
    assert fsynced.count(str(path.parent)) == 2  # the rename, each time
    assert str(path.parent.parent) in fsynced  # the config directory's own name when it was created
    assert path.read_text() == '{"a": 2}' and path.with_name("topics.json.bak").read_text() == '{"a": 1}'


def test_the_checkpoint_is_created_durably(open_store, fsynced):
    store = open_store()
    assert str(store.config.store.checkpoint_path.parent) in fsynced


def test_a_failed_sync_flush_fails_the_writer_and_refuses_later_writes(open_store, clock, eio):
    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    acked = []
    durability.inject_fsync_failure(after=5)
    for i in range(20):
        clock.advance(10)
        r = store.put_message(MessageInner("S", b"m%d" % i, keys=f"k{i}"))
        if not r.ok:
            break
        acked.append(r)
    assert len(acked) >= 2  # the first flushes succeeded (one or two syncs a put)
    assert r.status is PutStatus.FLUSH_DISK_FAILED and "fsync of the CommitLog failed" in r.error
    assert r.phy_offset >= 0  # it was appended, but is not counted as durable
    failed_at = r.phy_offset
    assert store.commit_log.flushed_where <= failed_at  # never counted as flushed
    assert store.checkpoint.physic_msg_timestamp < r.store_timestamp
    assert store.runtime_info()["flush_failed"] == store.flush_failure.error
    later = store.put_message(MessageInner("S", b"refused"))
    assert later.status is PutStatus.FLUSH_DISK_FAILED and later.phy_offset == -1  # nothing written
    max_before = store.commit_log.max_offset()
    assert store.put_messages([MessageInner("S", b"x")])[0].status is PutStatus.FLUSH_DISK_FAILED
    assert store.commit_log.max_offset() == max_before
    store.flush()  # no retry that could pretend: the position stays
    assert store.commit_log.flushed_where <= failed_at
    cfg = store.config
    store.shutdown()
    assert cfg.store.abort_path.exists()  # the next start recovers as after a crash
    durability.inject_fsync_failure(None)
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert again.last_exit_ok is False
        for i in range(len(acked)):
            assert [m.body for m in again.query_message("S", f"k{i}").messages] == [b"m%d" % i]
    finally:
        again.shutdown()


def test_a_failed_async_flush_refuses_later_writes(open_store, eio):
    store = open_store(background=True, flush_interval_commit_log_ms=5, flush_commit_log_least_pages=0)
    durability.inject_fsync_failure(after=0)
    assert store.put_message(MessageInner("A", b"first")).ok  # ASYNC: acknowledged from the page cache
    assert _wait(lambda: store.flush_failure.failed), "the flusher never ran"
    assert store.commit_log.flushed_where == 0
    r = store.put_message(MessageInner("A", b"second"))
    assert r.status is PutStatus.FLUSH_DISK_FAILED and r.phy_offset == -1


def test_the_checkpoint_records_the_flushed_time_not_the_last_write(open_store, clock):
    store = open_store(flush_commit_log_least_pages=4)
    first = store.put_message(MessageInner("C", b"a"))
    assert flush_commit_log(store, 0, rounds=1)
    assert store.checkpoint.physic_msg_timestamp == first.store_timestamp
    clock.advance(60_000)
    second = store.put_message(MessageInner("C", b"b"))
    assert second.store_timestamp > first.store_timestamp
    assert flush_commit_log(store, 4, rounds=1)  # fewer than 4 dirty pages: no sync happens
    assert store.commit_log.flushed_where < second.next_offset
    assert store.checkpoint.physic_msg_timestamp == first.store_timestamp
    store.flush_cq_service.flush(0)
    raw = Path(store.config.store.checkpoint_path).read_bytes()
    assert int.from_bytes(raw[:8], "big") == first.store_timestamp  # what is on disk, too
    assert flush_commit_log(store, 0, rounds=1)
    assert store.checkpoint.physic_msg_timestamp == second.store_timestamp


def test_without_threads_a_failed_sync_flush_fails_the_put(open_store, eio):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    assert store.put_message(MessageInner("S", b"ok")).ok
    durability.inject_fsync_failure(after=0)
    r = store.put_message(MessageInner("S", b"not durable"))
    assert r.status is PutStatus.FLUSH_DISK_FAILED and r.phy_offset >= 0
    assert store.commit_log.flushed_where <= r.phy_offset
