"""Recovery in-process: a torn or corrupted tail is cut at the last good record, derived queues follow."""

from __future__ import annotations

import os

import pytest

from broker_core.store import GetStatus, MessageStore
from broker_core.store.message import MessageInner


def _write(store, n: int, start: int = 0) -> list:  # type: ignore[no-untyped-def]
    out = [store.put_message(MessageInner("T", b"msg-%05d" % i + b"." * 500, i % 3, keys=f"k{i}"))
           for i in range(start, start + n)]
    store.dispatch()
    return out


def _bodies(store) -> list[bytes]:  # type: ignore[no-untyped-def]
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
def test_garbage_over_the_tail_is_truncated(open_store, clock, abnormal):
    store = open_store()
    results = _write(store, 300)
    cfg = store.config
    store.shutdown()
    victim = results[-5]  # garbage from the middle of the 5th-last record to the end of its segment
    seg_size = cfg.store.mapped_file_size_commit_log_bytes
    seg = cfg.store.commit_log_dir / f"{victim.phy_offset - victim.phy_offset % seg_size:020d}"
    with open(seg, "r+b") as fh:
        fh.seek(victim.phy_offset % seg_size + 100)
        fh.write(os.urandom(seg_size - victim.phy_offset % seg_size - 100))
    for later in cfg.store.commit_log_dir.iterdir():
        if int(later.name) > int(seg.name):
            later.unlink()
    if abnormal:
        cfg.store.abort_path.touch()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert again.last_exit_ok is (not abnormal)
        assert again.commit_log.max_offset() == victim.phy_offset
        assert _bodies(again) == sorted(b"msg-%05d" % i for i in range(295))
        assert again.query_message("T", "k296").messages == []
        assert len(again.query_message("T", "k294").messages) == 1
        # appends continue right after the last good record, with the right queue offsets
        r = again.put_message(MessageInner("T", b"after", 1))
        assert r.ok and r.phy_offset == victim.phy_offset
        assert r.queue_offset == sum(1 for i in range(295) if i % 3 == 1)
        again.dispatch()
        assert again.get_message("T", 1, r.queue_offset).messages[0].body == b"after"
    finally:
        again.shutdown()


def test_abnormal_restart_rebuilds_lost_consume_queue_units(open_store, clock):
    store = open_store()
    _write(store, 120)
    cfg = store.config
    store.shutdown()
    # Lose the ConsumeQueues and the index entirely (as a power loss might); the CommitLog is intact.
    for path in sorted(cfg.store.consume_queue_dir.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    for path in cfg.store.index_dir.iterdir():
        path.unlink()
    cfg.store.abort_path.touch()
    cfg.store.checkpoint_path.unlink()  # no safe point known: replay everything
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert _bodies(again) == sorted(b"msg-%05d" % i for i in range(120))
        assert again.get_max_offset_in_queue("T", 0) == 40
        assert len(again.query_message("T", "k7").messages) == 1
    finally:
        again.shutdown()


def test_clean_restart_keeps_everything_and_continues_offsets(open_store, clock):
    store = open_store()
    _write(store, 50)
    cfg = store.config
    store.shutdown()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        r = again.put_message(MessageInner("T", b"next", 0))
        assert r.queue_offset == 17
        again.dispatch()
        assert len(_bodies(again)) == 51
    finally:
        again.shutdown()


@pytest.mark.parametrize("abnormal", [False, True])
def test_index_hashed_by_an_earlier_version_is_rebuilt(open_store, clock, abnormal):
    """An IndexFile whose keys were hashed with crc32 (this product before it matched RocketMQ's
    ``abs(String.hashCode)``) is found at start and rebuilt from the CommitLog, so older keys stay findable."""
    import zlib

    from broker_core.codec.hashing import index_key_hash
    from broker_core.store.index_file import IndexFile

    store = open_store()
    results = _write(store, 40)
    cfg = store.config
    records = [store.look_message_by_offset(r.phy_offset) for r in results]
    store.shutdown()
    for f in cfg.store.index_dir.iterdir():
        f.unlink()
    legacy = IndexFile(cfg.store.index_dir / "20230101000000000", cfg.store.max_hash_slot_num, cfg.store.max_index_num,
                       create=True)
    entries = [(zlib.crc32(f"T#{k}".encode()) & 0x7FFFFFFF, rec.commit_log_offset, rec.store_timestamp)
               for rec in records for k in rec.keys]
    assert legacy.put_keys(entries, 0) == len(entries)
    legacy.write_header()
    legacy.close()
    if abnormal:
        cfg.store.abort_path.touch()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert [m.commit_log_offset for m in again.query_message("T", "k7").messages] == [results[7].phy_offset]
        assert len(again.query_message("T", "k39").messages) == 1
        (rebuilt,) = again.index_service.files
        assert rebuilt.select_phy_offsets(index_key_hash("T#k3"), 4, 0, 2**62) == [results[3].phy_offset]
    finally:
        again.shutdown()


@pytest.mark.parametrize("abnormal", [False, True])
def test_an_index_file_killed_before_its_header_was_written_does_not_stop_the_start(open_store, clock, abnormal):
    """A SIGKILL between creating the next IndexFile (zeros) and writing its header leaves a headerless file;
    the store starts, treats it as empty, and every key is still found."""
    from broker_core.codec.index_file import index_file_size

    store = open_store()
    results = _write(store, 30)
    cfg = store.config
    store.shutdown()
    headerless = cfg.store.index_dir / "29990101000000000"  # sorts last: the newest file
    headerless.write_bytes(b"\0" * index_file_size(cfg.store.max_hash_slot_num, cfg.store.max_index_num))
    if abnormal:
        cfg.store.abort_path.touch()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert [m.commit_log_offset for m in again.query_message("T", "k7").messages] == [results[7].phy_offset]
        again.put_message(MessageInner("T", b"after", 0, keys="after-key"))
        again.dispatch()
        assert [m.body for m in again.query_message("T", "after-key").messages] == [b"after"]
    finally:
        again.shutdown()
