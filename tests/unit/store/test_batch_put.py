"""The store's batch put (records written straight from a SEND_BATCH_MESSAGE body) against the per-message put
of the same entries: byte-identical CommitLogs, the same ConsumeQueue units, index entries and results, across
segment rolls; a batch that breaks a limit writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.codec.hashing import tag_hash
from broker_core.codec.message import decode_properties, encode_properties
from broker_core.codec.wire import decode_batch, encode_batch
from broker_core.store import MessageStore, PutStatus
from broker_core.store.message import MessageInner

EXTRA = encode_properties({"CLUSTER": "DefaultCluster"})
HOST, PORT = bytes([10, 0, 0, 7]), 4321


def entries(n: int, size: int = 3000) -> list[tuple[int, bytes, bytes]]:
    out = []
    for i in range(n):
        props = {"UNIQ_KEY": f"{i:032X}", "TAGS": f"T{i % 3}", "KEYS": f"k{i} alt{i}", "p": "ü" * (i % 4)}
        raw = encode_properties(props)
        if i % 5 == 0:
            raw = raw[:-1]  # no trailing separator: the broker adds one before its own properties
        if i % 7 == 0:
            raw = b""
        out.append((i, bytes([i % 251]) * (size + i), raw))
    return out


def per_message(store: MessageStore, topic: str, queue_id: int, body: bytes) -> list:
    msgs = []
    for flag, b, props_b in decode_batch(body):
        joined = props_b + EXTRA if not props_b or props_b.endswith(b"\x02") else props_b + b"\x02" + EXTRA
        msgs.append(MessageInner.from_encoded(topic, b, queue_id, joined, decode_properties(joined), flag=flag,
                                              sys_flag=0, born_timestamp=111, born_host=HOST, born_port=PORT,
                                              reconsume_times=0))
    return store.put_messages(msgs)


def commit_log_bytes(store: MessageStore) -> bytes:
    store.flush()
    return b"".join(Path(f.path).read_bytes() for f in store.commit_log.mapped_file_queue.files)


def test_batch_put_writes_what_the_per_message_put_writes(open_store, tmp_path: Path) -> None:
    body = encode_batch(entries(60))
    a = open_store(store_dir=tmp_path / "a")
    b = open_store(store_dir=tmp_path / "b")
    for store in (a, b):  # something in the queue and segment first
        store.put_message(MessageInner("Batch", b"first", 2))
    results = per_message(a, "Batch", 2, body)
    got, request = b.put_batch_nowait("Batch", 2, body, EXTRA, born_timestamp=111, born_host=HOST, born_port=PORT)
    assert request is None and got.ok and all(r.ok for r in results)
    assert len(a.commit_log.mapped_file_queue.files) >= 3  # the batch rolled segments
    assert commit_log_bytes(a) == commit_log_bytes(b)
    assert got.phys == [r.phy_offset for r in results]
    assert got.first_queue_offset == results[0].queue_offset == 1
    assert got.end_offset == results[-1].next_offset
    assert got.msg_ids == ",".join(r.msg_id for r in results)
    for store in (a, b):
        store.dispatch()
    assert a.get_max_offset_in_queue("Batch", 2) == b.get_max_offset_in_queue("Batch", 2) == 61
    ra, rb = (s.get_message("Batch", 2, 0, 100, decode=False) for s in (a, b))
    assert b"".join(ra.chunks) == b"".join(rb.chunks) and ra.queue_offsets == rb.queue_offsets
    ta, tb = (s.get_message("Batch", 2, 0, 100, tag_hashes={tag_hash("T1")}) for s in (a, b))
    assert [m.properties["TAGS"] for m in tb.messages] == ["T1"] * len(tb.messages) != []
    assert ta.queue_offsets == tb.queue_offsets
    for key in ("k13", "alt41", f"{17:032X}"):
        assert [m.body for m in b.query_message("Batch", key).messages] == [
            m.body for m in a.query_message("Batch", key).messages] != []


@pytest.mark.parametrize(("mutate", "status", "reason"), [
    (lambda e: [*e, (0, b"x" * 70000, b"")], PutStatus.MESSAGE_ILLEGAL, "maxMessageSize"),
    (lambda e: [*e, (0, b"x", b"a\x01" + b"v" * 32760)], PutStatus.PROPERTIES_SIZE_EXCEEDED, "32767"),
    (lambda e: [*e, (0, b"x", b"a\x01\xff\xfe")], PutStatus.MESSAGE_ILLEGAL, "UTF-8"),
    (lambda e: [], PutStatus.MESSAGE_ILLEGAL, "empty batch"),
])
def test_a_batch_breaking_a_limit_writes_nothing(open_store, mutate, status, reason) -> None:
    store = open_store(max_message_size_bytes=65536)
    got, _ = store.put_batch_nowait("Batch", 0, encode_batch(mutate(entries(5, 10))), EXTRA)
    assert got.status is status and reason in got.error and got.phys == []
    assert store.commit_log.max_offset() == 0 and store.get_max_offset_in_queue("Batch", 0) == 0


def test_a_truncated_batch_writes_nothing(open_store) -> None:
    store = open_store()
    got, _ = store.put_batch_nowait("Batch", 0, encode_batch(entries(3, 10))[:-3], EXTRA)
    assert got.status is PutStatus.MESSAGE_ILLEGAL and "runs past the batch" in got.error
    assert store.commit_log.max_offset() == 0


def test_sync_flush_batch_is_durable_before_it_is_acknowledged(open_store) -> None:
    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    got, request = store.put_batch_nowait("Batch", 0, encode_batch(entries(10, 100)), EXTRA)
    assert got.ok and request is not None and request.wait(5)
    assert store.commit_log.flushed_where >= got.end_offset
