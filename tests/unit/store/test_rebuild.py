"""Derived files rebuilt at start in-process: a deleted, truncated or corrupt IndexFile, and a deleted or corrupt
ConsumeQueue file, never stop the store and are rebuilt from the CommitLog (lookups and pulls complete)."""

from __future__ import annotations

import pytest

from broker_core.store import GetStatus, MessageStore
from broker_core.store.message import MessageInner

CQ_FILE = 20 * 10  # ten units a ConsumeQueue file


def _write(store, n: int) -> list:  # type: ignore[no-untyped-def]
    out = [store.put_message(MessageInner("R", b"msg-%05d" % i + b"." * 200, i % 2, keys=f"k{i}", uniq_key=f"U{i:05d}"))
           for i in range(n)]
    store.dispatch()
    return out


def _queue(store, qid: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    out, offset = [], 0
    while True:
        res = store.get_message("R", qid, offset, 32)
        if res.status is not GetStatus.FOUND:
            return out
        out.extend(m.body[:9] for m in res.messages)
        assert res.queue_offsets == list(range(offset, offset + len(res.queue_offsets)))
        offset = res.next_begin_offset


def _all_found(store, n: int) -> None:  # type: ignore[no-untyped-def]
    for qid in range(2):
        assert _queue(store, qid) == [b"msg-%05d" % i for i in range(qid, n, 2)]
    for i in range(n):
        assert [m.body[:9] for m in store.query_message("R", f"k{i}").messages] == [b"msg-%05d" % i], i
        assert len(store.query_message("R", f"U{i:05d}").messages) == 1


def _reopen(cfg, clock, abnormal: bool) -> MessageStore:  # type: ignore[no-untyped-def]
    if abnormal:
        cfg.store.abort_path.touch()
    return MessageStore(cfg, clock, background=False).start()


@pytest.fixture
def written(open_store):  # type: ignore[no-untyped-def]
    store = open_store(max_index_num=60, max_hash_slot_num=16, mapped_file_size_consume_queue_bytes=CQ_FILE)
    _write(store, 150)
    cfg = store.config
    store.shutdown()
    assert len(list(cfg.store.index_dir.iterdir())) >= 4
    return cfg


@pytest.mark.parametrize("which", ["newest", "middle", "all"])
@pytest.mark.parametrize("abnormal", [False, True])
def test_a_deleted_index_file_is_rebuilt(written, clock, which, abnormal):
    files = sorted(written.store.index_dir.iterdir())
    doomed = {"newest": files[-1:], "middle": files[1:2], "all": files}[which]
    for f in doomed:
        f.unlink()
    again = _reopen(written, clock, abnormal)
    try:
        _all_found(again, 150)
    finally:
        again.shutdown()


@pytest.mark.parametrize("damage", ["header", "truncated", "entries"])
def test_a_corrupt_index_file_does_not_stop_the_start_and_is_rebuilt(written, clock, damage):
    victim = sorted(written.store.index_dir.iterdir())[1]
    raw = bytearray(victim.read_bytes())
    if damage == "header":
        raw[:40] = b"\xff" * 40
    elif damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:  # the first entry after the header and slots
        base = 40 + 16 * 4
        raw[base + 20: base + 60] = b"\x7f" * 40
    victim.write_bytes(bytes(raw))
    again = _reopen(written, clock, False)
    try:
        _all_found(again, 150)
    finally:
        again.shutdown()


@pytest.mark.parametrize("which", ["middle", "last", "every"])
@pytest.mark.parametrize("abnormal", [False, True])
def test_a_deleted_consume_queue_file_is_rebuilt(written, clock, which, abnormal):
    qdir = written.store.consume_queue_dir / "R" / "0"
    files = sorted(qdir.iterdir())
    assert len(files) >= 5
    doomed = {"middle": files[2:3], "last": files[-1:], "every": files}[which]
    for f in doomed:
        f.unlink()
    again = _reopen(written, clock, abnormal)
    try:
        _all_found(again, 150)
        r = again.put_message(MessageInner("R", b"next", 0))
        assert r.queue_offset == 75
    finally:
        again.shutdown()


def test_a_corrupt_consume_queue_file_is_rebuilt(written, clock):
    victim = sorted((written.store.consume_queue_dir / "R" / "1").iterdir())[3]
    raw = bytearray(victim.read_bytes())
    raw[-20:-12] = (123).to_bytes(8, "big")  # the last unit points at the wrong record
    victim.write_bytes(bytes(raw))
    again = _reopen(written, clock, False)
    try:
        _all_found(again, 150)
    finally:
        again.shutdown()


def test_a_consume_queue_file_of_the_wrong_size_is_rebuilt(written, clock):
    victim = sorted((written.store.consume_queue_dir / "R" / "0").iterdir())[-2]
    victim.write_bytes(victim.read_bytes()[:100])
    again = _reopen(written, clock, False)
    try:
        _all_found(again, 150)
    finally:
        again.shutdown()
