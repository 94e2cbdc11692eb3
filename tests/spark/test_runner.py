"""Grouping splits into Spark tasks (no Spark needed): every split in exactly one task, tasks of about equal
bytes, each task's splits in segment order. The worker engine (:class:`InProcess`, no Spark): rows in segment
order, the chain check's re-read, progress and cancel; and the engine choice by size."""

from __future__ import annotations

from typing import Any

import pytest

from spark_jobs.runner import InProcess, JobCancelled, balanced_tasks, cancel, choose_engine, engine_name, run_splits
from spark_jobs.segments import STOP_BLANK, STOP_SPLIT, Segment, Split, SplitStats, plan_splits


def test_splits_are_grouped_into_even_tasks() -> None:
    mib = 1 << 20
    segments = [Segment(f"/s/{i:020d}", i * 256 * mib, 256 * mib) for i in range(8)]
    segments.append(Segment(f"/s/{8 * 256 * mib:020d}", 8 * 256 * mib, 3 * mib))  # a small active tail
    splits = plan_splits(segments, 128 * mib)
    tasks = balanced_tasks(splits, 4)
    assert len(tasks) == 4
    assert sorted(s.index for t in tasks for s in t) == [s.index for s in splits]
    sizes = [sum(s.end - s.start for s in t) for t in tasks]
    assert max(sizes) - min(sizes) <= 128 * mib  # within one split of each other
    for t in tasks:
        assert t == sorted(t, key=lambda s: (s.path, s.start))


def test_fewer_splits_than_tasks_and_none() -> None:
    splits = plan_splits([Segment("/s/0", 0, 1000)], 4096)
    assert balanced_tasks(splits, 8) == [splits]
    assert balanced_tasks([], 8) == []


class FakeWalk:
    """A split function over pretend segments of 1000 bytes with records every 100 bytes; ``lost_sync`` names
    segments whose second split reports a first record the first split did not end at (a chain break)."""

    def __init__(self, lost_sync: frozenset[str] = frozenset(), on_call: Any = None) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self.lost_sync, self.on_call = lost_sync, on_call

    def __call__(self, sp: Split) -> tuple[SplitStats, list[dict[str, Any]]]:
        self.calls.append((sp.segment, sp.start, sp.end))
        if self.on_call:
            self.on_call(sp)
        first = sp.start + (50 if sp.start and sp.path in self.lost_sync else 0)
        st = SplitStats(sp.index, sp.segment, first=first, last_end=sp.end,
                        stop=STOP_SPLIT if sp.end < sp.bound else STOP_BLANK, records=(sp.end - first) // 100,
                        bytes=sp.end - sp.start)
        return st, [{"segment": sp.segment, "pos": pos} for pos in range(first, sp.end, 100)]


SEGMENTS = [Segment("/s/00000000000000000000", 0, 1000), Segment("/s/00000000000000001000", 1000, 1000)]


def test_the_worker_engine_walks_every_split_in_segment_order() -> None:
    splits = plan_splits(SEGMENTS, 500)
    seen: list[dict[str, Any]] = []
    stats, rows, torn = run_splits(InProcess(), splits, FakeWalk(), progress=seen.append, interval=0)
    assert [(r["segment"][-4:], r["pos"]) for r in rows] == [
        (seg[-4:], pos) for seg in ("00000000000000000000", "00000000000000001000") for pos in range(0, 1000, 100)]
    assert sorted(stats) == [0, 1, 2, 3] and torn == []
    assert seen[-1]["phase"] == "done" and seen[-1]["fraction"] == 1.0
    assert seen[-1]["tasks_done"] == seen[-1]["tasks_total"] == 4 and seen[-1]["bytes_scanned"] == 2000


def test_the_worker_engine_rereads_a_segment_whose_chain_breaks() -> None:
    splits = plan_splits(SEGMENTS, 500)
    walk = FakeWalk(lost_sync=frozenset({SEGMENTS[1].path}))
    seen: list[dict[str, Any]] = []
    _stats, rows, _torn = run_splits(InProcess(), splits, walk, progress=seen.append, interval=0)
    assert walk.calls[-1] == ("00000000000000001000", 0, 1000)  # the broken segment, read again whole
    assert [r["pos"] for r in rows if r["segment"].endswith("1000")] == list(range(0, 1000, 100))
    assert "reread" in {p["phase"] for p in seen} and seen[-1]["tasks_total"] == 5


def test_cancel_stops_the_worker_engine_before_the_next_split() -> None:
    engine = InProcess()
    walk = FakeWalk(on_call=lambda sp: cancel(engine, "job-7"))
    with pytest.raises(JobCancelled):
        run_splits(engine, plan_splits(SEGMENTS, 500), walk, job_group="job-7")
    assert len(walk.calls) == 1
    assert engine.cancelled == set()  # the next run of the same group is not cancelled in advance


def test_the_engine_is_chosen_by_the_bytes_in_range() -> None:
    mib = 1 << 20
    assert choose_engine(10 * mib, 64 * mib) == "worker"
    assert choose_engine(64 * mib, 64 * mib) == "spark"
    assert choose_engine(0, 0) == "spark"  # a threshold of 0: always Spark
    assert engine_name(InProcess()) == "worker" and engine_name(object()) == "spark"
