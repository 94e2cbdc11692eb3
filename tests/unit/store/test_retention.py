"""Retention with an injected clock and a fake disk-usage probe."""

from __future__ import annotations

import os
from datetime import datetime

import pytest

from broker_core.store import GetStatus, PutStatus
from broker_core.store.message import MessageInner

HOUR = 3600 * 1000


class FakeDisk:
    def __init__(self, ratio: float = 0.5) -> None:
        self.ratio = ratio

    def __call__(self, path) -> float:  # type: ignore[no-untyped-def]
        return self.ratio


def at_hour(hour: int) -> int:
    return int(datetime(2026, 11, 20, hour, 30).timestamp() * 1000)


def fill(store, segments: int) -> list:  # type: ignore[no-untyped-def]
    """Write until the CommitLog has ``segments`` full segments plus an active one."""
    results = []
    i = 0
    while len(store.commit_log.mapped_file_queue.files) <= segments:
        results.append(store.put_message(MessageInner("T", b"%06d" % i + b"." * 2000, i % 2, keys=f"k{i}")))
        i += 1
    store.dispatch()
    return results


def age(store, now_ms: int, ages_hours: list[float]) -> None:  # type: ignore[no-untyped-def]
    """Set segment i's mtime to ``now - ages_hours[i]``; the rest are fresh."""
    for mf, hours in zip(store.commit_log.mapped_file_queue.files, ages_hours, strict=False):
        ts = (now_ms - hours * HOUR) / 1000
        os.utime(mf.path, (ts, ts))


@pytest.fixture
def disk():
    return FakeDisk()


def test_deletes_expired_at_delete_when_hour_and_min_offsets_advance(open_store, clock, disk):
    store = open_store(disk_probe=disk, mapped_file_size_consume_queue_bytes=20 * 10)
    fill(store, 6)
    now = at_hour(4)
    clock.set(now)
    age(store, now, [100, 90, 80, 10, 100, 100])  # stop at the first unexpired file (index 3)
    before = store.get_min_offset_in_queue("T", 0)
    first_cl = store.commit_log.min_offset()
    report = store.clean_expired_files()
    assert report.triggers == ["time"]
    assert len(report.deleted_commit_log_files) == 3
    assert store.commit_log.min_offset() == first_cl + 3 * store.config.store.mapped_file_size_commit_log_bytes
    assert report.deleted_consume_queue_files >= 1
    after = store.get_min_offset_in_queue("T", 0)
    assert after > before
    res = store.get_message("T", 0, before)
    assert res.status is GetStatus.OFFSET_TOO_SMALL and res.next_begin_offset == after
    assert "below the queue's min offset" in res.error
    ok = store.get_message("T", 0, after)
    assert ok.status is GetStatus.FOUND and ok.messages[0].queue_offset == after
    assert store.query_message("T", "k0").messages == []  # deleted with its segment


def test_nothing_deleted_outside_delete_when(open_store, clock, disk):
    store = open_store(disk_probe=disk)
    fill(store, 4)
    now = at_hour(3)
    clock.set(now)
    age(store, now, [500, 500, 500, 500])
    report = store.clean_expired_files()
    assert report.triggers == [] and report.deleted_commit_log_files == []
    assert store.commit_log.min_offset() == 0


def test_delete_when_accepts_several_hours(open_store, clock, disk):
    store = open_store(disk_probe=disk, delete_when="03;05")
    fill(store, 2)
    clock.set(at_hour(5))
    age(store, at_hour(5), [100, 100])
    assert len(store.clean_expired_files().deleted_commit_log_files) == 2


def test_space_trigger_deletes_only_expired_files(open_store, clock, disk):
    store = open_store(disk_probe=disk)
    fill(store, 4)
    now = at_hour(3)
    clock.set(now)
    age(store, now, [100, 100, 1, 1])
    disk.ratio = 0.80
    report = store.clean_expired_files()
    assert report.triggers == ["space"] and not report.disk.clean_immediately
    assert len(report.deleted_commit_log_files) == 2
    assert store.put_message(MessageInner("T", b"still ok")).ok


def test_forced_clean_ignores_age_and_caps_at_ten_files(open_store, clock, disk):
    store = open_store(disk_probe=disk)
    fill(store, 13)
    now = at_hour(3)
    clock.set(now)
    age(store, now, [1] * 13)  # nothing expired
    disk.ratio = 0.86
    report = store.clean_expired_files()
    assert report.disk.clean_immediately and not report.disk.disk_full
    assert len(report.deleted_commit_log_files) == 10
    assert store.put_message(MessageInner("T", b"accepted")).ok
    report = store.clean_expired_files()
    assert len(report.deleted_commit_log_files) == 3  # never the active segment
    assert len(store.commit_log.mapped_file_queue.files) == 1


def test_warning_level_refuses_writes_until_usage_drops(open_store, clock, disk):
    store = open_store(disk_probe=disk)
    fill(store, 2)
    clock.set(at_hour(3))
    disk.ratio = 0.91
    report = store.clean_expired_files()
    assert report.disk.disk_full and store.disk_full
    refused = store.put_message(MessageInner("T", b"no room"))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE and "disk full" in refused.error
    disk.ratio = 0.87  # still above the forced-clean ratio: stays refused
    store.check_disk()
    assert store.put_message(MessageInner("T", b"no room")).status is PutStatus.SERVICE_NOT_AVAILABLE
    disk.ratio = 0.60
    store.check_disk()
    assert store.put_message(MessageInner("T", b"room again")).ok


def test_manual_delete(open_store, clock, disk):
    store = open_store(disk_probe=disk)
    fill(store, 3)
    now = at_hour(15)
    clock.set(now)
    age(store, now, [100, 100, 100])
    assert store.clean_expired_files().deleted_commit_log_files == []
    store.execute_delete_files_manually()
    report = store.clean_expired_files()
    assert report.triggers == ["manual"] and len(report.deleted_commit_log_files) == 3


def test_reader_holding_a_segment_postpones_its_deletion(open_store, clock, disk):
    store = open_store(disk_probe=disk)
    fill(store, 3)
    now = at_hour(4)
    clock.set(now)
    age(store, now, [100, 100, 100])
    held = store.commit_log.get_data(0)
    report = store.clean_expired_files()
    assert report.deleted_commit_log_files == []  # first file is held: stop, do not skip it
    held.release()
    assert len(store.clean_expired_files().deleted_commit_log_files) == 3


def test_survives_restart_after_retention(open_store, clock, disk, tmp_path):
    store = open_store(disk_probe=disk)
    results = fill(store, 5)
    now = at_hour(4)
    clock.set(now)
    age(store, now, [100, 100, 1, 1, 1])
    store.clean_expired_files()
    cfg = store.config
    min_q0 = store.get_min_offset_in_queue("T", 0)
    store.shutdown()
    from broker_core.store import MessageStore

    again = MessageStore(cfg, clock, disk, background=False).start()
    try:
        assert again.get_min_offset_in_queue("T", 0) == min_q0
        assert again.get_max_offset_in_queue("T", 0) == (len(results) + 1) // 2
        last = results[-1]
        assert again.look_message_by_offset(last.phy_offset).body.startswith(b"%06d" % (len(results) - 1))
    finally:
        again.shutdown()
