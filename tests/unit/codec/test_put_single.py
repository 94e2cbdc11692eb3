"""The store's one-message put in one C call (``_native.put_single``, codec/message_append.py): for a message that
fits the last segment it must do exactly what its pure twin and ``CommitLog.put_messages([msg])`` do (same record
bytes, result, queue table, dispatch hand-off, segment positions, notification); anything else returns None
having done nothing, and the store's batch way answers it."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import message_append
from broker_core.store import MessageStore, PutStatus
from broker_core.store.clock import Clock, ManualClock, OffsetClock
from broker_core.store.message import MessageInner
from broker_core.store.results import PutMessageResult
from tests.plugins.stores import records_written

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

RESULT_SLOTS = ("status", "phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "store_port", "error")


@pytest.fixture
def clock() -> Clock:
    """The wall clock (put_single reads it itself; a ManualClock sends every put the batch way)."""
    return Clock()


def single(fn: Any, store: MessageStore, msg: MessageInner) -> Any:
    return fn(store.commit_log, msg, PutStatus.PUT_OK, PutMessageResult)


def view(r: PutMessageResult) -> tuple[Any, ...]:
    return tuple(getattr(r, name) for name in RESULT_SLOTS if name != "store_timestamp")


def test_wall_offset_of_each_clock() -> None:
    assert Clock().wall_offset == 0
    shifted = OffsetClock(-3_600_000)
    assert shifted.wall_offset == shifted.offset_ms == -3_600_000
    shifted.offset_ms = 7_200_000  # UPDATE_BROKER_CONFIG clockOffsetMs, while the broker runs
    assert shifted.wall_offset == 7_200_000 and abs(shifted.now_ms() - Clock().now_ms() - 7_200_000) < 1000
    assert ManualClock().wall_offset is None

    class Own(Clock):  # a time of its own, offset undeclared: not the wall clock
        def now_ms(self) -> int:
            return 5
    assert Own().wall_offset is None


def test_the_put_follows_a_clock_offset_changed_while_running(open_store: Any) -> None:
    store = open_store()
    cl = store.commit_log
    cl.clock = OffsetClock(0)
    store.put_message(MessageInner("T", b"first"))
    for offset in (0, 3_600_000, -86_400_000):
        cl.clock.offset_ms = offset
        want = time.time_ns() // 1_000_000 + offset
        r = native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult)
        assert r is not None and want <= r.store_timestamp <= want + 1000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["T", "Orders", "Ü"]), st.binary(min_size=1, max_size=3000),
                          st.integers(0, 3), st.sampled_from([None, "TagA"]), st.sampled_from([None, "k1 k2"]),
                          st.sampled_from([0, 0, 4, 12])), min_size=1, max_size=40))
def test_native_and_pure_twins_store_the_same(open_store: Any, tmp_path: Any,
                                              specs: list[tuple[Any, ...]]) -> None:
    """Same messages through each twin (a None answered by the batch way, as CommitLog.put_message does, here
    with segment rolls every few messages): equal records, results, queue tables and hand-offs."""
    stores = [open_store(store_dir=tmp_path / f"{name}-{time.monotonic_ns()}") for name in ("native", "pure")]
    outcomes: list[list[tuple[Any, ...]]] = [[], []]
    for t, body, q, tag, keys, sys_flag in specs:
        for k, (fn, store) in enumerate(zip((native.put_single, message_append.py_put_single), stores,
                                            strict=True)):
            msg = MessageInner(t, body, q, tags=tag, keys=keys, uniq_key="U" * 32, sys_flag=sys_flag)
            before = time.time_ns() // 1_000_000
            r = single(fn, store, msg)
            taken = r is not None
            if r is None:
                r = store.commit_log.put_messages([msg])[0]
            else:
                assert before <= r.store_timestamp <= time.time_ns() // 1_000_000
            outcomes[k].append((taken, *view(r)))
    native_store, pure_store = stores
    assert outcomes[0] == outcomes[1]
    assert records_written(native_store) == records_written(pure_store)
    assert native_store.commit_log.topic_queue_table == pure_store.commit_log.topic_queue_table

    def handoff(store: MessageStore) -> list[tuple[Any, ...]]:
        return [p[:6] + p[7:] for p in store.commit_log.pending_dispatch]  # without the store timestamp
    assert handoff(native_store) == handoff(pure_store)
    for store in stores:
        mf = store.commit_log.mapped_file_queue.files[-1]
        assert store.commit_log.begin_time_in_lock == 0 and not store.commit_log.put_lock.locked()
        assert mf.store_timestamp > 0 and mf.wrote_position == store.commit_log.max_offset() - mf.file_from_offset


@pytest.mark.parametrize("fn", [native.put_single, message_append.py_put_single], ids=["native", "pure"])
def test_the_common_case_records_and_notifies(open_store: Any, fn: Any) -> None:
    store = open_store()
    cl = store.commit_log
    store.put_message(MessageInner("T", b"first"))  # the first segment
    calls: list[int] = []
    cl.after_append = lambda: calls.append(cl.put_lock.locked())
    before = cl.max_offset()
    r = single(fn, store, MessageInner("T", b"x" * 100, 1, keys="a b", uniq_key="U" * 32))
    assert r is not None and r.ok and r.phy_offset == before and r.queue_offset == 0
    assert calls == [False]  # told once, after the lock was released
    assert cl.topic_queue_table[("T", 1)] == 1 and cl.pending_dispatch[-1][0] == before
    assert cl.mapped_file_queue.files[-1].store_timestamp == r.store_timestamp
    cl.dispatch_armed = True  # a dispatch is scheduled on the loop already: not told again
    assert single(fn, store, MessageInner("T", b"z")) is not None and calls == [False]
    cl.dispatch_armed = False
    found = store.get_message("T", 1, 0, 1)
    assert found.messages[0].body == b"x" * 100 and found.messages[0].keys == ["a", "b"]
    cl.after_append = None  # the dispatcher thread's way: its event, set only when it sleeps
    cl.appended.clear()
    cl.wake_on_append = True
    assert single(fn, store, MessageInner("T", b"y")) is not None and cl.appended.is_set()


@pytest.mark.parametrize("fn", [native.put_single, message_append.py_put_single], ids=["native", "pure"])
def test_anything_else_is_left_to_the_batch_way(open_store: Any, fn: Any) -> None:
    store = open_store(max_message_size_bytes=1000)
    cl = store.commit_log
    assert single(fn, store, MessageInner("T", b"x")) is None  # no segment yet
    assert store.put_message(MessageInner("T", b"x")).ok  # the batch way made one
    end = cl.max_offset()
    refused = [MessageInner("T", b"x" * 1001), MessageInner("T" * 128, b"x"), MessageInner("T", b"x", -1)]
    for msg in refused:
        assert single(fn, store, msg) is None
        assert not store.put_message(msg).ok
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with cl.put_lock:
            held.set()
            done.wait(5.0)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5.0)
    try:
        assert single(fn, store, MessageInner("T", b"x")) is None  # another thread holds the lock: no waiting here
    finally:
        done.set()
        holder.join()
    cl.clock = ManualClock()  # a clock of its own
    assert single(fn, store, MessageInner("T", b"x")) is None
    assert cl.max_offset() == end and cl.begin_time_in_lock == 0 and not cl.put_lock.locked()


@pytest.mark.parametrize("fn", [native.put_single, message_append.py_put_single], ids=["native", "pure"])
def test_a_record_past_the_segment_end_rolls_the_batch_way(open_store: Any, fn: Any) -> None:
    store = open_store()
    cl = store.commit_log
    size = cl.mapped_file_size
    taken = 0
    while cl.max_offset() < 2 * size:
        msg = MessageInner("T", b"z" * 3000)
        r = single(fn, store, msg)
        taken += r is not None
        if r is None:
            assert cl.put_message(msg).ok
    assert taken > 0 and len(cl.mapped_file_queue.files) >= 3
    assert store.dispatch() and store.get_max_offset_in_queue("T", 0) == cl.topic_queue_table[("T", 0)]


def test_a_field_out_of_range_raises_as_the_batch_way(open_store: Any) -> None:
    store = open_store()
    store.put_message(MessageInner("T", b"first"))
    end = store.commit_log.max_offset()
    msg = MessageInner("T", b"x", flag=1 << 40)
    assert native.put_single(store.commit_log, msg, PutStatus.PUT_OK, PutMessageResult) is None
    with pytest.raises(struct.error):
        store.put_message(msg)
    with pytest.raises(struct.error):
        message_append.py_put_single(store.commit_log, msg, PutStatus.PUT_OK, PutMessageResult)
    assert store.commit_log.max_offset() == end and not store.commit_log.put_lock.locked()


def test_errors_release_the_lock_and_record_nothing(open_store: Any) -> None:
    store = open_store()
    cl = store.commit_log
    store.put_message(MessageInner("T", b"first"))
    end = cl.max_offset()
    cl.after_append = lambda: 1 / 0  # the hook fails after the append: the error reaches the caller
    with pytest.raises(ZeroDivisionError):
        native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult)
    assert cl.max_offset() > end and not cl.put_lock.locked()
    cl.after_append = None
    end = cl.max_offset()
    mf = cl.mapped_file_queue.files[-1]
    real = mf.wv
    mf.wv = memoryview(bytearray(16))  # shorter than the segment: refused before anything is written
    try:
        with pytest.raises(ValueError, match="shorter"):
            native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult)
    finally:
        mf.wv = real
    assert cl.max_offset() == end and cl.begin_time_in_lock == 0 and not cl.put_lock.locked()


def test_the_prefault_is_asked_when_the_writer_nears_the_end_asked_for(open_store: Any) -> None:
    store = open_store()
    cl = store.commit_log
    store.put_message(MessageInner("T", b"first"))
    asked: list[int] = []
    cl._prefault_ahead = 1 << 20
    cl._prefault = lambda mf: asked.append(mf.wrote_position)  # type: ignore[method-assign]
    cl.prefault = None  # no service yet: asked
    assert native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult) is not None
    assert asked == [cl.max_offset()]

    class Service:
        low_water = 100
    cl.prefault = Service()  # type: ignore[assignment]
    mf = cl.mapped_file_queue.files[-1]
    mf.prefault_end = mf.wrote_position + 10_000  # asked far ahead already: not asked
    native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult)
    assert len(asked) == 1
    mf.prefault_end = mf.wrote_position + 150  # the next record ends within low_water of it: asked
    native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult)
    assert len(asked) == 2
    cl.prefault = None
    cl._prefault_ahead = 0  # switched off: never asked
    native.put_single(cl, MessageInner("T", b"x"), PutStatus.PUT_OK, PutMessageResult)
    assert len(asked) == 2
