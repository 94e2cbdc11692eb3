"""``append_messages`` (the store's put loop, codec/message_append.py) in C against its pure twin: driven as
``CommitLog.put_messages`` drives it (a refused message is answered apart and the loop goes on; a message the C
loop leaves is written by the pure one; a full segment ends the run), both give the same segment bytes, queue
offsets, dispatcher tuples, results and progress, or raise the same exception at the same message."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import message_append
from broker_core.codec.message import END_FILE_MIN_BLANK_LENGTH, HEADER_SIZE, decode_record
from broker_core.store.message import MessageInner

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
I32 = st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.sampled_from([-(1 << 31), (1 << 31) - 1, 1 << 31]))
I64 = st.one_of(st.integers(0, 1 << 45), st.sampled_from([-1, (1 << 63) - 1, 1 << 63]))


@st.composite
def messages(draw: st.DrawFn) -> Any:
    topic = draw(st.sampled_from(["T", "Orders", "SCHEDULE_TOPIC_XXXX", "Ü"]))
    body = draw(st.binary(max_size=300))
    tags = draw(st.sampled_from([None, "", "TagA", "ü\U0001F600"]))
    msg = MessageInner(topic, body, draw(st.integers(0, 3)), tags=tags,
                       keys=draw(st.sampled_from([None, "k1", "k1 k2"])),
                       uniq_key=draw(st.sampled_from([None, "7F000001000000000000000000000001"])),
                       sys_flag=draw(st.sampled_from([0, 1, 4, 8, 12])), born_timestamp=draw(I64) % (1 << 63),
                       born_host="10.0.0.7", born_port=draw(st.integers(0, 65535)),
                       reconsume_times=draw(st.integers(0, 16)))
    msg.flag = draw(I32)  # may be out of range: the pure loop raises struct.error, the C loop leaves it to it
    msg.delay_ms = draw(st.sampled_from([0, 0, 1000, 3_600_000]))
    msg.prepared_transaction_offset = draw(st.sampled_from([0, 123456789]))
    kind = draw(st.sampled_from(["plain"] * 6 + ["refused", "bytearray", "long-host"]))
    if kind == "refused":
        msg.limits_error = True
    elif kind == "bytearray":  # any buffer is a body to the pure loop; the C loop leaves it to it
        msg.body = bytearray(body)
    elif kind == "long-host":  # struct's "4s" keeps the first four bytes
        msg.born_host = b"\x0a\x00\x00\x07\xff\xff"
    return msg


def drive(fn: Any, msgs: list[Any], pos: int, file_size: int, base: int, max_body: int,
          table: dict[tuple[str, int], int]) -> tuple[Any, ...]:
    """What CommitLog.put_messages does with ``fn``, without rolling segments."""
    buf = bytearray(file_size)
    pending: list[tuple[Any, ...]] = []
    results: list[Any] = [None] * len(msgs)
    progress = [pos]
    i, error = 0, None
    try:
        while i < len(msgs):
            pos, i = fn(buf, progress[0], file_size, base, msgs, i, len(msgs), max_body, 1_700_000_000_123,
                        b"\x7f\x00\x00\x01", 10911, table, pending.append, results, "OK",
                        lambda *a: a, progress)
            if i >= len(msgs):
                break
            m = msgs[i]
            total = HEADER_SIZE + len(m.body) + len(m.tail)
            if m.limits_error or len(m.body) > max_body or total + END_FILE_MIN_BLANK_LENGTH > file_size:
                results[i] = "refused"
                i += 1
            elif total + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
                break
            else:
                _, i = message_append.py_append_messages(
                    buf, progress[0], file_size, base, msgs, i, i + 1, max_body, 1_700_000_000_123,
                    b"\x7f\x00\x00\x01", 10911, table, pending.append, results, "OK", lambda *a: a, progress)
    except struct.error as exc:  # where it stopped is in the results and the progress compared below
        error, i = type(exc), -1
    written = bytes(buf[:progress[0]])  # what lies past progress is not the store's (rewritten by the next put)
    return written, dict(table), pending, results, progress[0], i, error


@FAST
@given(st.lists(messages(), min_size=1, max_size=10), st.integers(0, 2000), st.integers(600, 5000),
       st.integers(0, 1 << 40), st.sampled_from([64, 250, 4 << 20]),
       st.dictionaries(st.tuples(st.sampled_from(["T", "Orders"]), st.integers(0, 3)), st.integers(0, 1 << 40)))
def test_append_messages_native_equals_pure(msgs: list[Any], pos: int, file_size: int, base: int, max_body: int,
                                            table: dict[tuple[str, int], int]) -> None:
    pos = min(pos, file_size)
    pure = drive(message_append.py_append_messages, msgs, pos, file_size, base, max_body, dict(table))
    fast = drive(native.append_messages, msgs, pos, file_size, base, max_body, dict(table))
    assert fast == pure


def test_records_read_back_with_their_fields_and_queue_offsets() -> None:
    """A known case by hand: two messages of one queue, a prepared transaction message (no queue slot) and a
    delayed one (its unit's tag code is its delivery time), read back by the record decoder."""
    msgs = [MessageInner("Orders", b"one", 1, tags="TagA", keys="k1"),
            MessageInner("Orders", b"two", 1, sys_flag=4),
            MessageInner("Orders", b"three", 1)]
    msgs[2].delay_ms = 5000
    for fn in (message_append.py_append_messages, native.append_messages):
        buf = bytearray(4096)
        pending: list[tuple[Any, ...]] = []
        results: list[Any] = [None] * 3
        progress = [100]
        table = {("Orders", 1): 7}
        pos, i = fn(buf, 100, 4096, 1 << 30, msgs, 0, 3, 1024, 1_700_000_000_000, b"\x7f\x00\x00\x01", 10911,
                    table, pending.append, results, "OK", lambda *a: SimpleNamespace(args=a), progress)
        assert i == 3 and pos == progress[0] and table == {("Orders", 1): 9}
        recs = []
        at = 100
        while at < pos:
            rec = decode_record(bytes(buf), at)
            recs.append(rec)
            at += rec.store_size
        assert [(r.body, r.queue_offset, r.commit_log_offset, r.sys_flag) for r in recs] == [
            (b"one", 7, (1 << 30) + 100, 0), (b"two", 8, (1 << 30) + 100 + recs[0].store_size, 4),
            (b"three", 8, (1 << 30) + 100 + recs[0].store_size + recs[1].store_size, 0)]
        assert [p[4] for p in pending] == [7, 8, 8]
        assert pending[2][5] == 1_700_000_000_000 + 5000
        assert [r.args[3] for r in results] == [7, 8, 8]
