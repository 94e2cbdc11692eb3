"""The receive/ack journal (broker_core.server.pop_state): replay, idempotent replay over a snapshot, torn tails,
serials across restarts, per-group counts and a bounded journal."""

from __future__ import annotations

from pathlib import Path

from broker_core.server.pop_state import JOURNAL_FILE, InFlight, PopQueue, PopState

KEY = ("g1", "T", 0)


def _hand(state: PopState, key: tuple[str, str, int], offsets: list[int], deadline: int = 1000,
          reconsume: int = 0) -> PopQueue:
    pq = state.queues.setdefault(key, PopQueue(0))
    for o in offsets:
        state.add(key, pq, o, InFlight(deadline, reconsume, state.next_serial()))
        pq.next = max(pq.next, o + 1)
    state.hand_out(key, pq, offsets, 3)
    return pq


def _view(state: PopState) -> dict[tuple[str, str, int], tuple[int, dict[int, tuple[int, int, int]]]]:
    return {k: (pq.next, {o: (f.deadline_ms, f.reconsume, f.serial) for o, f in pq.inflight.items()})
            for k, pq in state.queues.items()}


def _reopen(path: Path) -> PopState:
    state = PopState(path)
    state.load()
    return state


def test_a_restart_keeps_in_flight_messages_acks_counts_and_serials(tmp_path: Path) -> None:
    state = PopState(tmp_path)
    state.load()
    pq = _hand(state, KEY, [0, 1, 2, 3])
    state.finish(KEY, pq, [1, 3])  # acked
    pq.inflight[0].reconsume, pq.inflight[0].serial, pq.inflight[0].deadline_ms = 2, state.next_serial(), 5000
    state.hand_out(KEY, pq, [0], 7)  # handed out again
    _hand(state, ("g2", "T", 1), [10])
    before, serial = _view(state), state.serial
    # no close(): the journal alone, as after SIGKILL
    again = _reopen(tmp_path)
    assert _view(again) == before
    assert _view(again)[KEY] == (4, {0: (5000, 2, serial - 1), 2: (1000, 0, 3)})
    assert again.max_reconsume == {"g1": 7, "g2": 3}
    assert again.inflight_by_group == {"g1": 2, "g2": 1}
    assert again.next_serial() == serial + 1  # a handle from before the restart never matches a new delivery


def test_replaying_a_journal_over_a_snapshot_that_includes_it_changes_nothing(tmp_path: Path) -> None:
    state = PopState(tmp_path)
    state.load()
    pq = _hand(state, KEY, [0, 1])
    state.finish(KEY, pq, [0])
    _hand(state, KEY, [2])
    state.finish(KEY, pq, [2])
    journal = (tmp_path / JOURNAL_FILE).read_bytes()
    expected = _view(state)
    state.compact()  # snapshot written...
    (tmp_path / JOURNAL_FILE).write_bytes(journal)  # ...and a crash before the journal was emptied
    again = _reopen(tmp_path)
    assert _view(again) == expected
    assert again.inflight_by_group["g1"] == 1


def test_a_torn_last_line_ends_the_replay_and_is_dropped(tmp_path: Path) -> None:
    state = PopState(tmp_path)
    state.load()
    pq = _hand(state, KEY, [0, 1])
    state.finish(KEY, pq, [0])
    expected = _view(state)
    with open(tmp_path / JOURNAL_FILE, "ab") as f:
        f.write(b'{"k":"d","g":"g1","t":"T","q":0,"o":[1')  # a crash in the middle of a write
    again = _reopen(tmp_path)
    assert _view(again) == expected
    assert (tmp_path / JOURNAL_FILE).stat().st_size == 0  # the load compacted: the torn line is gone
    again.finish(KEY, again.queues[KEY], [1])
    assert _view(_reopen(tmp_path)) == {KEY: (2, {})}


def test_the_journal_stays_bounded_by_compaction(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("broker_core.server.pop_state.COMPACT_MIN_BYTES", 4096)
    state = PopState(tmp_path)
    state.load()
    compactions = 0
    for n in range(2000):
        pq = _hand(state, KEY, [n])
        state.finish(KEY, pq, [n])
        compactions += state.maybe_compact()
        assert (tmp_path / JOURNAL_FILE).stat().st_size <= 4096 + 200
    assert compactions > 10
    assert _view(_reopen(tmp_path)) == {KEY: (2000, {})}


def test_a_clean_close_leaves_only_the_snapshot(tmp_path: Path) -> None:
    state = PopState(tmp_path)
    state.load()
    _hand(state, KEY, [0])
    state.sync()
    state.close()
    assert (tmp_path / JOURNAL_FILE).stat().st_size == 0
    assert _view(_reopen(tmp_path))[KEY] == (1, {0: (1000, 0, 1)})
