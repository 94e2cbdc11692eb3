"""The dispatcher's per-message loops in C against their pure twins (codec/consume_queue.py): ``pack_units``
(a run of ConsumeQueue units written in one call) and ``take_pending`` (the drain of the put path's hand-off)
give the same results, buffer bytes and deque/list contents for the same input; and the store's
``ConsumeQueue.put_units`` writes the same queue as one ``put_message_position_info`` per unit."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import consume_queue
from broker_core.codec.consume_queue import CQ_STORE_UNIT_SIZE, CQ_UNIT
from broker_core.store.consume_queue import ConsumeQueue

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EDGE_INT = st.sampled_from([0, 1, -1, (1 << 31) - 1, 1 << 31, -(1 << 31) - 1, (1 << 63) - 1, 1 << 63, True])


@st.composite
def unit_lists(draw: st.DrawFn) -> tuple[list[Any], int]:
    """Units as group_units makes them (consecutive queue offsets from ``expect``), sometimes broken: a gap, a
    field out of range, a bool, a wrong shape."""
    expect = draw(st.integers(0, 1 << 40))
    units: list[Any] = []
    for i in range(draw(st.integers(0, 12))):
        units.append((draw(st.integers(0, 1 << 45)), draw(st.integers(1, 5000)), draw(st.integers(-99, 1 << 40)),
                      expect + i))
    if units and draw(st.booleans()):
        at = draw(st.integers(0, len(units) - 1))
        phy, size, tags, qoff = units[at]
        units[at] = draw(st.sampled_from([
            (phy, size, tags, qoff + draw(st.sampled_from([1, -1]))),  # a gap (or a unit already written)
            (draw(EDGE_INT), size, tags, qoff), (phy, draw(EDGE_INT), tags, qoff), (phy, size, draw(EDGE_INT), qoff),
            (phy, size, tags), [phy, size, tags, qoff], (phy, size, 1.5, qoff)]))
    return units, expect


@FAST
@given(unit_lists(), st.data())
def test_pack_units(case: tuple[list[Any], int], data: st.DataObject) -> None:
    units, expect = case
    size = data.draw(st.integers(0, 14)) * CQ_STORE_UNIT_SIZE + data.draw(st.integers(0, 19))
    pos = data.draw(st.integers(0, max(0, size - 1)))
    end = data.draw(st.integers(pos, size))
    start = data.draw(st.integers(0, len(units)))
    stop = data.draw(st.integers(start, len(units)))
    pure_buf, fast_buf = bytearray(size), bytearray(size)
    min_end = data.draw(st.sampled_from([-1, 0, 1 << 30, 1 << 44]))
    n = consume_queue.py_pack_units(pure_buf, pos, end, units, start, stop, expect, min_end)
    assert native.pack_units(fast_buf, pos, end, units, start, stop, expect, min_end) == n
    assert fast_buf == pure_buf
    for k in range(n):  # what was written is the units, in the layout
        assert CQ_UNIT.unpack_from(pure_buf, pos + k * CQ_STORE_UNIT_SIZE) == units[start + k][:3]


@FAST
@given(st.lists(st.integers(1, 300), max_size=20), st.integers(0, 20), st.integers(0, 6000), st.integers(0, 25),
       st.integers(0, 3000))
def test_take_pending(sizes: list[int], gap_at: int, limit: int, max_n: int, jump: int) -> None:
    entries = []
    phy = 1000
    for i, size in enumerate(sizes):
        if i == gap_at:  # the next segment (or a hand-off that does not line up)
            phy += jump
        entries.append((phy, size, "T", 0, i))
        phy += size
    pure_pending, fast_pending = deque(entries), deque(entries)
    pure_batch: list[tuple[Any, ...]] = [("already",)]
    fast_batch: list[tuple[Any, ...]] = [("already",)]
    offset = consume_queue.py_take_pending(pure_pending, pure_batch, 1000, 1000 + limit, max_n)
    assert native.take_pending(fast_pending, fast_batch, 1000, 1000 + limit, max_n) == offset
    assert fast_batch == pure_batch and fast_pending == pure_pending
    assert pure_batch[1:] == entries[:len(pure_batch) - 1]


def test_take_pending_passes_errors_on() -> None:
    for take in (consume_queue.py_take_pending, native.take_pending):
        with pytest.raises(TypeError):
            take(deque([(0, "x")]), [], 0, 10, 5)


@FAST
@given(st.lists(st.integers(1, 500), min_size=1, max_size=40), st.integers(0, 39), st.data())
def test_put_units_writes_what_one_put_per_unit_writes(tmp_path_factory: pytest.TempPathFactory, sizes: list[int],
                                                       split: int, data: st.DataObject) -> None:
    """Across file boundaries (5 units a file), after a replayed prefix, with a gap that takes the slow path."""
    root: Path = tmp_path_factory.mktemp("cq")
    units = []
    phy = 0
    for i, size in enumerate(sizes):
        units.append((phy, size, i * 7, i + (3 if data.draw(st.booleans()) and i == split else 0)))
        phy += size
    units.sort(key=lambda u: u[3])  # a queue's units come in queue-offset order
    one, run = (ConsumeQueue("T", 0, root / name, 5 * CQ_STORE_UNIT_SIZE) for name in ("one", "run"))
    try:
        for u in units:
            one.put_message_position_info(*u)
        run.put_units(units[:split])
        run.put_units(units, min(split, len(units)))
        assert run.max_physic_offset == one.max_physic_offset
        assert run.get_max_offset_in_queue() == one.get_max_offset_in_queue()
        for a, b in zip(one.mapped_file_queue.files, run.mapped_file_queue.files, strict=True):
            assert a.wrote_position == b.wrote_position
            assert bytes(a.mv[:a.wrote_position]) == bytes(b.mv[:b.wrote_position])
    finally:
        one.close()
        run.close()
