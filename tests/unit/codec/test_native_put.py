"""The C put loop's direct slot access (codec/_native_c/, ``SlotMap``): it reads a message's fields from the slots its
class's attribute lookup finds, and fills a ``PutMessageResult`` without calling it when the class declares
``__native_slots__``. Each shortcut must give what asking by name and calling the class give; anything it cannot
take that way (another class, a property over a field, an unset slot, a class that declares nothing or other
names) goes the general way."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import message_append
from broker_core.store.message import MessageInner
from broker_core.store.results import PutMessageResult, PutStatus

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

HOST, PORT, TS = b"\x7f\x00\x00\x01", 10911, 1_700_000_000_123
RESULT_SLOTS = ("status", "phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "store_port", "error")


def put(fn: Any, msgs: list[Any], result_cls: Any = PutMessageResult) -> tuple[bytes, list[Any], list[Any], dict]:
    buf = bytearray(1 << 16)
    pending: deque[tuple[Any, ...]] = deque()
    results: list[Any] = [None] * len(msgs)
    table: dict[tuple[str, int], int] = {}
    progress = [0]
    pos, i = fn(buf, 0, len(buf), 4096, msgs, 0, len(msgs), 1 << 20, TS, HOST, PORT, table, pending.append,
                results, PutStatus.PUT_OK, result_cls, progress)
    assert i == len(msgs)
    return bytes(buf[:pos]), results, list(pending), table


def slots(result: PutMessageResult) -> tuple[Any, ...]:
    return type(result), tuple(getattr(result, name) for name in RESULT_SLOTS)


def test_the_declared_slots_are_what_init_sets() -> None:
    """The promise the C loop relies on: calling the class with seven arguments sets exactly these slots."""
    assert PutMessageResult.__native_slots__ == RESULT_SLOTS
    assert sorted(PutMessageResult.__slots__) == sorted(RESULT_SLOTS)
    r = PutMessageResult(PutStatus.PUT_OK, 1, 2, 3, 4, b"\x01\x02\x03\x04", 5)
    assert slots(r)[1] == (PutStatus.PUT_OK, 1, 2, 3, 4, b"\x01\x02\x03\x04", 5, "")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["T", "Orders", "Ü"]), st.binary(max_size=200), st.integers(0, 3),
                          st.sampled_from([None, "TagA"]), st.sampled_from([None, "k1 k2"])), min_size=1, max_size=8))
def test_slot_reads_and_filled_results_equal_the_pure_loop(specs: list[tuple[Any, ...]]) -> None:
    msgs = [MessageInner(t, b, q, tags=tag, keys=k, uniq_key="U" * 32, born_host="10.0.0.7", born_port=7)
            for t, b, q, tag, k in specs]
    got = put(native.append_messages, msgs)
    want = put(message_append.py_append_messages, msgs)
    assert got[0] == want[0] and got[2] == want[2] and got[3] == want[3]
    assert [slots(r) for r in got[1]] == [slots(r) for r in want[1]]
    assert all(r.msg_id == w.msg_id and r.ok for r, w in zip(got[1], want[1], strict=True))


def test_a_property_over_a_field_is_asked_by_name() -> None:
    class Upper(MessageInner):
        __slots__ = ()

        @property  # type: ignore[override]  # a subclass computing a field: the C loop must not read the slot
        def body(self) -> bytes:
            return b"computed"

        @body.setter
        def body(self, value: bytes) -> None:
            pass

    msg = Upper("T", b"stored", 0)
    assert put(native.append_messages, [msg])[0] == put(message_append.py_append_messages, [Upper("T", b"x", 0)])[0]
    assert b"computed" in put(native.append_messages, [msg])[0]
    # the plain class after it is mapped again (one map, the last class seen)
    plain = MessageInner("T", b"stored", 0)
    assert b"stored" in put(native.append_messages, [plain])[0]


def test_an_unset_slot_raises_what_the_lookup_raises() -> None:
    msg = MessageInner("T", b"x", 0)
    del msg.reconsume_times
    with pytest.raises(AttributeError):
        put(native.append_messages, [msg])
    with pytest.raises(AttributeError):
        put(message_append.py_append_messages, [msg])


def test_result_classes_that_declare_nothing_or_other_names_are_called() -> None:
    calls: list[tuple[Any, ...]] = []

    class Plain(PutMessageResult):
        __slots__ = ()
        __native_slots__ = None  # type: ignore[assignment]  # declares nothing: called

        def __init__(self, *args: Any) -> None:
            calls.append(args)
            super().__init__(*args)

    class Other(Plain):
        __slots__ = ()
        __native_slots__ = ("status", "size", "phy_offset", "queue_offset", "store_timestamp", "store_host",  # type: ignore[assignment]  # another order: called
                            "store_port", "error")

    for cls in (Plain, Other, Plain):
        calls.clear()
        _, results, _, _ = put(native.append_messages, [MessageInner("T", b"x", 0)], cls)
        assert len(calls) == 1 and type(results[0]) is cls and results[0].size == calls[0][2]
    _, results, _, _ = put(native.append_messages, [MessageInner("T", b"x", 0)])  # and back to the direct fill
    assert type(results[0]) is PutMessageResult and results[0].error == ""
