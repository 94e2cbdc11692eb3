"""Running a per-split function over snapshot splits with progress, cancellation and the chain check.

Progress: ``progress(info)`` is called from a polling thread (every ``interval`` s, and once at the end) with
``{"stages": n, "stages_done": n, "tasks_done": n, "tasks_total": n, "tasks_active": n, "bytes_scanned": n,
"bytes_total": n, "fraction": 0..1, "phase": "scan" | "reread" | "done"}`` read from Spark's status tracker
(tasks of the job group) and an accumulator of bytes walked by finished tasks.

Cancellation: every Spark job of a run is in the job group ``job_group`` (``sc.setJobGroup``);
:func:`cancel` (``sc.cancelJobGroup``) from any thread stops it and the run raises :class:`JobCancelled`.

Engines (adaptive execution): ``spark`` is a SparkSession; an :class:`InProcess` instance instead runs the same
split functions one after another in this process, no Spark at all (the choice for small ranges, see
:func:`choose_engine`): the same chain check and re-reads, the same progress dicts (one "stage"), and
:func:`cancel` takes effect before the next split.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from broker_core.codec import native as codec_native
from spark_jobs.segments import Split, SplitStats, chain_breaks, merge_torn, whole_segment_splits
from spark_jobs.split_io import prefetch

ProgressCallback = Callable[[dict[str, Any]], None]
SplitFn = Callable[[Split], tuple[SplitStats, list[dict[str, Any]]]]


class JobCancelled(RuntimeError):
    """The job group was cancelled."""


ENGINE_SPARK, ENGINE_WORKER = "spark", "worker"


def codec_in_use() -> str:
    """The codec this process decodes with, ``"native"`` or ``"pure"``: each split records it where it ran (a
    module function, so a Spark task calls the executor's own, not a value pickled on the driver)."""
    return codec_native.IMPLEMENTATION


def codecs_of(stats: dict[int, SplitStats]) -> list[str]:
    """The codecs the splits of ``stats`` were decoded with (sorted)."""
    return sorted({str(s.extra["codec"]) for s in stats.values() if "codec" in s.extra})


class InProcess:
    """The engine without Spark: splits run in the calling process, in order (see the module docstring)."""

    name = ENGINE_WORKER

    def __init__(self) -> None:
        self.cancelled: set[str] = set()


def engine_name(spark: Any) -> str:
    """``"worker"`` for :class:`InProcess`, ``"spark"`` for a SparkSession."""
    return ENGINE_WORKER if isinstance(spark, InProcess) else ENGINE_SPARK


def choose_engine(bytes_in_range: int, threshold_bytes: int) -> str:
    """``"worker"`` when the bytes to read are below ``threshold_bytes`` (Spark's start-up and scheduling would
    cost more than the scan), else ``"spark"``. A threshold of 0 always picks Spark."""
    return ENGINE_WORKER if bytes_in_range < threshold_bytes else ENGINE_SPARK


def cancel(spark: Any, job_group: str) -> None:
    """Cancel every running Spark job of ``job_group`` (safe from any thread); for :class:`InProcess`, the run
    stops before its next split."""
    if isinstance(spark, InProcess):
        spark.cancelled.add(job_group)
        return
    spark.sparkContext.cancelJobGroup(job_group)


class _Poller(threading.Thread):
    def __init__(self, sc: Any, group: str, callback: ProgressCallback, acc: Any, bytes_total: int,
                 interval: float) -> None:
        super().__init__(name=f"progress-{group}", daemon=True)
        self.sc, self.group, self.callback, self.acc = sc, group, callback, acc
        self.bytes_total, self.interval = bytes_total, interval
        self.stop_event = threading.Event()
        self.phase = "scan"

    def snapshot(self) -> dict[str, Any]:
        tracker = self.sc.statusTracker()
        stages = done_stages = tasks_done = tasks_total = active = 0
        for jid in tracker.getJobIdsForGroup(self.group) or []:
            job = tracker.getJobInfo(jid)
            if job is None:
                continue
            for sid in job.stageIds:
                st = tracker.getStageInfo(sid)
                if st is None:
                    continue
                stages += 1
                tasks_total += st.numTasks
                tasks_done += st.numCompletedTasks
                active += st.numActiveTasks
                done_stages += st.numCompletedTasks >= st.numTasks
        try:
            scanned = int(self.acc.value)
        except Exception:  # noqa: BLE001 - the accumulator is read-only off the driver thread in some versions
            scanned = 0
        frac = scanned / self.bytes_total if self.bytes_total else (tasks_done / tasks_total if tasks_total else 0)
        return {"stages": stages, "stages_done": done_stages, "tasks_done": tasks_done, "tasks_total": tasks_total,
                "tasks_active": active, "bytes_scanned": scanned, "bytes_total": self.bytes_total,
                "fraction": round(min(frac, 1.0), 4), "phase": self.phase}

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.callback(self.snapshot())
            except Exception:  # noqa: BLE001 - a failing callback must not kill the job's progress thread
                pass


def run_splits(spark: Any, splits: list[Split], fn: SplitFn, *, progress: ProgressCallback | None = None,
               job_group: str | None = None, description: str = "broker_core scan",
               interval: float = 0.5) -> tuple[dict[int, SplitStats], list[dict[str, Any]], list[dict[str, Any]]]:
    """Run ``fn`` on every split (in :func:`balanced_tasks` groups); re-read segments whose split chain breaks as
    one split.
    Returns ``(stats by split index, rows in segment order, torn tails)``."""
    if isinstance(spark, InProcess):
        return _run_in_process(spark, splits, fn, progress, job_group or f"broker_core-{uuid.uuid4().hex[:12]}",
                               interval)
    sc = spark.sparkContext
    group = job_group or f"broker_core-{uuid.uuid4().hex[:12]}"
    acc = sc.accumulator(0)
    bytes_total = sum(s.end - s.start for s in splits)
    poller = _Poller(sc, group, progress, acc, bytes_total, interval) if progress else None
    sc.setJobGroup(group, description, interruptOnCancel=True)
    if poller:
        poller.start()

    def reread() -> None:
        if poller:
            poller.phase = "reread"

    try:
        return _with_rereads(splits, lambda batch: _run(sc, batch, fn, acc), reread)
    except Exception as exc:
        if _was_cancelled(exc):
            raise JobCancelled(f"job group {group} was cancelled") from None
        raise
    finally:
        if poller:
            poller.stop_event.set()
            poller.phase = "done"
            final = poller.snapshot()
            final["fraction"] = 1.0
            try:
                progress(final)  # type: ignore[misc]  # progress checked non-None above
            except Exception:  # noqa: BLE001 - see _Poller.run
                pass
        sc.setLocalProperty("spark.jobGroup.id", None)


Results = list[tuple[SplitStats, list[dict[str, Any]]]]


def _with_rereads(splits: list[Split], run: Callable[[list[Split]], Results], on_reread: Callable[[], None]
                  ) -> tuple[dict[int, SplitStats], list[dict[str, Any]], list[dict[str, Any]]]:
    """Both engines: ``run`` every split, re-run segments whose split chain breaks as one split each, and
    return ``(stats by split index, rows in segment order, torn tails)``."""
    results = run(splits)
    stats = {st.index: st for st, _ in results}
    broken = chain_breaks(splits, stats)
    if broken:
        on_reread()
        again = whole_segment_splits(splits, broken, len(splits))
        results = [r for r, sp in zip(results, _by_index(splits, results), strict=True)
                   if sp.path not in broken] + run(again)
        splits = [s for s in splits if s.path not in broken] + again
        stats = {st.index: st for st, _ in results}
    order = {s.index: (s.path, s.start) for s in splits}
    rows: list[dict[str, Any]] = []
    for _st, part in sorted(results, key=lambda r: order[r[0].index]):
        rows.extend(part)
    return stats, rows, merge_torn(splits, stats)


def _run_in_process(engine: InProcess, splits: list[Split], fn: SplitFn, progress: ProgressCallback | None,
                    group: str, interval: float
                    ) -> tuple[dict[int, SplitStats], list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`run_splits` without Spark: the same split function, chain check and re-read, in this process."""
    bytes_total = sum(s.end - s.start for s in splits)
    n = {"done": 0, "total": len(splits), "scanned": 0}
    phase = "scan"
    last = time.monotonic()

    def info(final: bool = False) -> dict[str, Any]:
        frac = 1.0 if final else (n["scanned"] / bytes_total if bytes_total else 0.0)
        return {"stages": 1, "stages_done": int(final), "tasks_done": n["done"], "tasks_total": n["total"],
                "tasks_active": 0 if final else 1, "bytes_scanned": n["scanned"], "bytes_total": bytes_total,
                "fraction": round(min(frac, 1.0), 4), "phase": "done" if final else phase}

    def run(batch: list[Split]) -> Results:
        nonlocal last
        out = []
        if phase == "reread":  # the re-read segments come on top of the splits already counted
            n["total"] += len(batch)
        for i, sp in enumerate(batch):
            if group in engine.cancelled:
                raise JobCancelled(f"job group {group} was cancelled")
            if i + 1 < len(batch):
                prefetch(batch[i + 1])
            st, rows = fn(sp)
            st.extra["codec"] = codec_in_use()
            out.append((st, rows))
            n["done"] += 1
            n["scanned"] += st.bytes
            if progress and time.monotonic() - last >= interval:
                last = time.monotonic()
                progress(info())
        return out

    def reread() -> None:
        nonlocal phase
        phase = "reread"

    try:
        return _with_rereads(splits, run, reread)
    finally:
        if progress:
            progress(info(final=True))
        engine.cancelled.discard(group)


def _by_index(splits: list[Split], results: Results) -> list[Split]:
    idx = {s.index: s for s in splits}
    return [idx[st.index] for st, _ in results]


TASKS_PER_CORE = int(os.environ.get("SPARK_JOBS_TASKS_PER_CORE", "2"))


def balanced_tasks(splits: list[Split], tasks: int) -> list[list[Split]]:
    """Group ``splits`` into at most ``tasks`` lists of about equal bytes (largest split first, each to the
    lightest list), each list in segment order. Fewer, even tasks than one per split: in local mode every task
    costs a scheduling round trip, and a lone small last split would otherwise run in a round of its own."""
    bins: list[tuple[int, int, list[Split]]] = [(0, i, []) for i in range(max(1, min(tasks, len(splits))))]
    heapq.heapify(bins)
    for sp in sorted(splits, key=lambda s: s.end - s.start, reverse=True):
        size, i, members = heapq.heappop(bins)
        members.append(sp)
        heapq.heappush(bins, (size + sp.end - sp.start, i, members))
    return [sorted(m, key=lambda s: (s.path, s.start)) for _, _, m in sorted(bins, key=lambda b: b[1]) if m]


def _run(sc: Any, splits: list[Split], fn: SplitFn, acc: Any) -> Results:
    """One Spark task per group of :func:`balanced_tasks` (``TASKS_PER_CORE`` per core of the context)."""
    if not splits:
        return []

    def part(it):  # type: ignore[no-untyped-def]  # a pyspark mapPartitions function (no stubs)
        for group in it:
            for i, sp in enumerate(group):
                if i + 1 < len(group):
                    prefetch(group[i + 1])  # fetched over the network (when it is) while this one is walked
                st, rows = fn(sp)
                st.extra["codec"] = codec_in_use()
                acc.add(st.bytes)
                yield st, rows

    groups = balanced_tasks(splits, sc.defaultParallelism * TASKS_PER_CORE)
    return sc.parallelize(groups, len(groups)).mapPartitions(part).collect()


def _was_cancelled(exc: BaseException) -> bool:
    text = str(exc)
    return "cancelled" in text.lower() and ("job group" in text.lower() or "SparkException" in text
                                            or "Job" in text)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0
