from __future__ import annotations

import pytest

from broker_core.codec.hashing import tag_hash
from broker_core.codec.message import TRANSACTION_PREPARED_TYPE
from broker_core.store import GetStatus, PutStatus
from broker_core.store.errors import StoreLockedError
from broker_core.store.message import MessageInner


def test_limits_are_refused_with_clear_status(open_store):
    store = open_store(max_message_size_bytes=1000)
    r = store.put_message(MessageInner("T" * 128, b"x"))
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "topic" in r.error
    r = store.put_message(MessageInner("T", b"x" * 1001))
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "maxMessageSize" in r.error
    r = store.put_message(MessageInner("T", b"x", properties={"p": "v" * 32767}))
    assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    r = store.put_message(MessageInner("", b"x"))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert store.commit_log.max_offset() == 0  # nothing written
    ok = store.put_message(MessageInner("T" * 127, b"x" * 1000))
    assert ok.ok


def test_record_larger_than_a_segment_is_refused(open_store):
    store = open_store(max_message_size_bytes=4 * 1024 * 1024)
    r = store.put_message(MessageInner("T", b"x" * 70_000))
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "segment" in r.error


def test_segment_roll_with_blank_and_reads_across(open_store):
    store = open_store()
    size = store.config.store.mapped_file_size_commit_log_bytes
    results = [store.put_message(MessageInner("Roll", bytes([i % 256]) * 3000, 0, keys=f"k{i}")) for i in range(100)]
    assert all(r.ok for r in results)
    files = store.commit_log.mapped_file_queue.files
    assert len(files) >= 4
    assert [f.file_from_offset for f in files] == [i * size for i in range(len(files))]
    # no record spans a boundary; the first record of each later segment starts at its beginning
    starts = {r.phy_offset for r in results}
    for f in files[1:]:
        assert f.file_from_offset in starts
    store.dispatch()
    got = []
    offset = 0
    while True:
        res = store.get_message("Roll", 0, offset, 7)
        if res.status is not GetStatus.FOUND:
            assert res.status is GetStatus.OFFSET_OVERFLOW_ONE
            break
        got.extend(res.messages)
        offset = res.next_begin_offset
    assert [m.body[:1] for m in got] == [bytes([i % 256]) for i in range(100)]
    assert [m.queue_offset for m in got] == list(range(100))


def test_queue_offsets_and_tags(open_store):
    store = open_store()
    for i in range(10):
        store.put_message(MessageInner("T", b"m%d" % i, i % 2, tags="A" if i % 3 else "B"))
    store.put_message(MessageInner("T", b"half", 0, sys_flag=TRANSACTION_PREPARED_TYPE))
    store.dispatch()
    assert store.get_max_offset_in_queue("T", 0) == 5  # the prepared message takes no queue offset
    res = store.get_message("T", 0, 0, 32, tag_hashes={tag_hash("B")})
    assert [m.body for m in res.messages] == [b"m0", b"m6"]
    assert res.queue_offsets == [0, 3]
    assert res.next_begin_offset == 5


def test_get_message_statuses(open_store):
    store = open_store()
    assert store.get_message("Nope", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    store.put_message(MessageInner("T", b"a"))
    store.dispatch()
    assert store.get_message("T", 0, 1).status is GetStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("T", 0, 5)
    assert bad.status is GetStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 0
    assert store.get_message("T", 0, 0).status is GetStatus.FOUND


def test_lookups_by_id_key_and_time(open_store, clock):
    store = open_store()
    ids = []
    for i in range(20):
        clock.advance(1000)
        r = store.put_message(MessageInner("T", b"body%d" % i, 0, keys=[f"order-{i % 5}", "all"],
                                           uniq_key=f"U{i:02d}"))
        ids.append((r.msg_id, r.store_timestamp))
    store.dispatch()
    rec = store.view_message_by_id(ids[7][0])
    assert rec.body == b"body7" and rec.offset_msg_id == ids[7][0]
    res = store.query_message("T", "order-3")
    assert [m.body for m in res.messages] == [b"body18", b"body13", b"body8", b"body3"]
    assert not res.truncated
    assert store.query_message("T", "U05").messages[0].body == b"body5"
    capped = store.query_message("T", "all", max_num=5)
    assert len(capped.messages) == 5 and capped.truncated
    assert [m.body for m in capped.messages] == [b"body%d" % i for i in range(19, 14, -1)]
    ranged = store.query_message("T", "all", 32, ids[2][1], ids[4][1])
    assert sorted(m.body for m in ranged.messages) == [b"body2", b"body3", b"body4"]
    assert store.query_message("Other", "all").messages == []
    assert store.get_offset_in_queue_by_time("T", 0, ids[10][1]) == 10
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("T", 0, ids[-1][1] + 1) == 20


def test_index_rolls_to_new_files(open_store):
    store = open_store(max_index_num=20)
    for i in range(50):
        store.put_message(MessageInner("T", b"x", 0, keys=f"k{i}"))
    store.dispatch()
    assert len(store.index_service.files) >= 3
    for i in range(50):
        assert [m.keys for m in store.query_message("T", f"k{i}").messages] == [[f"k{i}"]]


def test_second_store_on_same_dir_is_refused(open_store, tmp_path, clock):
    from broker_core.store import MessageStore

    first = open_store()
    with pytest.raises(StoreLockedError, match="in use by another broker"):
        MessageStore(first.config, clock, background=False).start()


def test_disk_full_flag_refuses_and_writes_nothing(open_store):
    store = open_store()
    store.disk_guard.full = True
    r = store.put_message(MessageInner("T", b"x"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and "disk full" in r.error
    assert store.commit_log.max_offset() == 0


def test_a_field_out_of_range_stops_the_batch_after_what_was_stored(open_store):
    """A flag outside int32 (a client can send one) raises struct.error at that message, as the record layout
    cannot hold it; what came before it in the batch is stored and accounted (write position, queue offset,
    dispatch), and the next put goes on after it, in the native put loop and the pure one alike."""
    import struct

    store = open_store()
    before = MessageInner("T", b"before", 0)
    bad = MessageInner("T", b"bad", 0)
    bad.flag = 1 << 40
    with pytest.raises(struct.error):
        store.put_messages([before, bad, MessageInner("T", b"never", 0)])
    after = store.put_message(MessageInner("T", b"after", 0))
    assert after.ok and after.queue_offset == 1
    store.dispatch()
    res = store.get_message("T", 0, 0, 32)
    assert [m.body for m in res.messages] == [b"before", b"after"]
    assert [m.queue_offset for m in res.messages] == [0, 1]
    assert store.commit_log.max_offset() == after.phy_offset + after.size
