"""Grouping splits into Spark tasks (no Spark needed): every split in exactly one task, tasks of about equal
bytes, each task's splits in segment order."""

from __future__ import annotations

from spark_jobs.runner import balanced_tasks
from spark_jobs.segments import Segment, plan_splits


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
