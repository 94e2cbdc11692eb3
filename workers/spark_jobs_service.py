"""Spark jobs of the console (``spark.search``, ``spark.trace``): run one :class:`console.models.Job` on this worker.

For each broker registered with the name server (or the job's ``params["brokers"]``): take a segment snapshot
of the job's store-time range through the SDK, run :func:`spark_jobs.jobs.search.run_search` /
:func:`spark_jobs.jobs.trace.run_trace` over its manifest, and release the snapshot in ``finally``. Rows and
timeline steps carry the broker's name beside the record's coordinates. Results go to the results URI,
``settings.SPARK_RESULTS_URI/<job id>/`` (``results.jsonl`` + ``results.csv`` for a search, ``trace.json`` for a
trace; a local path or any Hadoop filesystem URI, see :mod:`workers.spark_results`, which also serves them to the
console); the Job row holds the counts and where the files are. A run first deletes what an earlier run of the
same job left there (through the same store).

Adaptive execution: the snapshots of every target broker are taken first; when they hold fewer bytes than
``settings.SPARK_LOCAL_THRESHOLD_BYTES`` the job runs in this process with the same transforms and no Spark
(:class:`spark_jobs.runner.InProcess`; no SparkSession is even built), else on Spark. ``result["engine"]`` says
which (``"worker"`` or ``"spark"``) and ``result["bytes_in_range"]`` on what size it was chosen.

Segment reads: an executor (or this process) opens a snapshot's files when it can, and fetches them from the
broker over the network when it cannot (``spark_jobs.remote``; ``settings.SPARK_SEGMENT_READS="network"``
always fetches, for a Spark cluster on other hosts where a same-named path could exist).

Progress: the engine's progress callback (its polling thread, every 0.5 s) writes ``progress``/``total`` (tasks
done / tasks in all the job's Spark stages so far) and ``result["progress"]`` (stages, tasks, bytes scanned,
fraction over all brokers, phase) to the row. The same callback reads the row's status: ``cancelling`` (set by
the console) makes it call :func:`spark_jobs.runner.cancel` on the job's Spark job group; the run raises
``JobCancelled`` and the job ends ``cancelled``.

A job is claimed only from ``pending`` (a redelivered or duplicate task for a job already running, finished
or cancelled does nothing). One SparkSession per worker process, built on first use (:func:`session`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.db import connection

from console import broker_client
from console.jobs import states as job_states
from console.jobs.models import Job
from spark_jobs.runner import ENGINE_WORKER, InProcess, JobCancelled, cancel, choose_engine, engine_name
from workers import spark_results

log = logging.getLogger(__name__)

SEARCH_KIND, TRACE_KIND = "spark.search", "spark.trace"
DEFAULT_MAX_ROWS = 100_000  # rows kept when the request gives no limit (counts stay exact; ``truncated`` says so)

_session: Any = None
_session_lock = threading.Lock()


def session() -> Any:
    """This process's SparkSession (``SPARK_MASTER``, ``SPARK_CONF_*``; see :mod:`spark_jobs.session`)."""
    global _session
    with _session_lock:
        if _session is None or getattr(_session.sparkContext, "_jsc", None) is None:
            from spark_jobs.session import build_session

            _session = build_session("broker_core-console-jobs")
        return _session


class _Progress:
    """The progress callback of one job: sums the finished Spark runs (brokers, trace passes) with the current
    one, writes it to the row (throttled), and turns a ``cancelling`` row into a Spark cancel."""

    def __init__(self, job_id: int, group: str, brokers: int) -> None:
        self.job_id, self.group, self.brokers = job_id, group, max(brokers, 1)
        self.spark: Any = None  # the engine running now (set once chosen): what a cancel goes to
        self.base = {"stages": 0, "stages_done": 0, "tasks_done": 0, "tasks_total": 0, "bytes_scanned": 0,
                     "bytes_total": 0}
        self.current: dict[str, Any] = {}
        self.broker, self.brokers_done, self.phase = "", 0, "snapshot"
        self.cancel_sent = False
        self.lock = threading.Lock()

    def start_broker(self, name: str) -> None:
        with self.lock:
            self._fold()
            self.broker = name

    def end_broker(self) -> None:
        with self.lock:
            self._fold()
            self.brokers_done += 1

    def _fold(self) -> None:
        for k in self.base:
            self.base[k] += int(self.current.get(k, 0))
        self.current = {}

    def state(self) -> dict[str, Any]:
        cur = self.current
        out: dict[str, Any] = {k: v + int(cur.get(k, 0)) for k, v in self.base.items()}
        out["tasks_active"] = int(cur.get("tasks_active", 0))
        frac = float(cur.get("fraction", 0.0)) if cur.get("phase") != "done" else 0.0
        out["fraction"] = round(min(1.0, (self.brokers_done + frac) / self.brokers), 4)
        out.update(phase=self.phase, broker=self.broker, brokers=self.brokers,
                   brokers_done=self.brokers_done)
        return out

    def __call__(self, info: dict[str, Any]) -> None:
        with self.lock:
            self.current = info
            self.phase = str(info.get("phase") or self.phase)
            if self.phase == "done":  # a finished Spark run (a trace pass): keep its counts; the next starts at 0
                self._fold()
            state = self.state()
        try:
            self.save(state)
            status = Job.objects.filter(pk=self.job_id).values_list("status", flat=True).first()
            if status == Job.CANCELLING and not self.cancel_sent and self.spark is not None:
                self.cancel_sent = True
                cancel(self.spark, self.group)
        finally:
            if threading.current_thread() is not threading.main_thread():
                connection.close()  # the engine's polling thread: one per Spark run

    def save(self, state: dict[str, Any]) -> None:
        job = Job.objects.filter(pk=self.job_id).only("result").first()
        if job is None:
            return
        Job.objects.filter(pk=self.job_id).update(
            progress=state["tasks_done"], total=state["tasks_total"], result={**job.result, "progress": state})

    def cancel_requested(self) -> bool:
        return job_states.cancel_requested(self.job_id)


def _targets(job: Job) -> dict[str, str]:
    table = broker_client.admin().cluster_info().get("brokerAddrTable", {})
    addrs = {name: data["brokerAddrs"]["0"] for name, data in sorted(table.items())
             if "0" in data.get("brokerAddrs", {})}
    wanted = job.params.get("brokers") or []
    if wanted:
        missing = sorted(set(wanted) - set(addrs))
        if missing:
            raise LookupError(f"brokers not registered with the name server: {', '.join(missing)}")
        addrs = {k: v for k, v in addrs.items() if k in wanted}
    if not addrs:
        raise LookupError("no broker is registered with the name server")
    return addrs


def _claim(job_id: int, worker: str | None) -> Job | None:
    if not job_states.claim(job_id):
        return None
    job = Job.objects.get(pk=job_id)
    if worker:
        job.result = {**job.result, "worker": worker}
        job.save(update_fields=["result"])
    return job


def fail_orphaned(worker: str) -> list[int]:
    """Mark failed the Spark jobs that ``worker`` (a Celery worker's hostname) claimed and never finished: it
    died or was killed mid-job. Called when that worker starts again; jobs of other workers are left alone.
    Their snapshots expire on the broker by themselves. Returns the job ids."""
    ids = job_states.fail_orphaned((SEARCH_KIND, TRACE_KIND), worker,
                                   f"the worker {worker} stopped while this job ran (found when it started again)")
    if ids:
        log.warning("spark jobs %s of worker %s were orphaned: marked failed", ids, worker)
    return ids


def _finish(job_id: int, status: str, extra: dict[str, Any], progress: _Progress | None) -> None:
    job = Job.objects.get(pk=job_id)
    result = {**job.result, **extra}
    fields: dict[str, Any] = {}
    if progress is not None:
        state = progress.state()
        if status == Job.DONE:
            state.update(fraction=1.0, phase="done", tasks_done=state["tasks_total"])
        result["progress"] = state
        fields.update(progress=state["tasks_done"], total=state["tasks_total"])
    job_states.finish(job_id, status, result, **fields)


def run_job(job_id: int, spark: Any = None, worker: str | None = None) -> dict[str, Any]:
    """Run the pending Spark job ``job_id`` (on the Celery worker named ``worker``, recorded in the job's result
    for :func:`fail_orphaned`) on ``spark`` (default: this process's session, built only when the job's size
    calls for Spark) or in the worker (see the module docstring); returns ``{"job", "status"}`` (or
    ``skipped``)."""
    job = _claim(job_id, worker)
    if job is None:
        return {"job": job_id, "status": "skipped"}
    progress: _Progress | None = None
    try:
        targets = _targets(job)
        progress = _Progress(job_id, f"console-job-{job_id}", len(targets))
        spark_results.clear(job_id)
        run = _run_search if job.kind == SEARCH_KIND else _run_trace if job.kind == TRACE_KIND else None
        if run is None:
            raise ValueError(f"not a Spark job kind: {job.kind}")
        summary = run(job, targets, _Engines(spark), progress)
        _finish(job_id, Job.DONE, summary, progress)
        return {"job": job_id, "status": Job.DONE}
    except JobCancelled:
        _finish(job_id, Job.CANCELLED, {"error": "cancelled by request"}, progress)
        return {"job": job_id, "status": Job.CANCELLED}
    except Exception as exc:  # the job boundary: any failure is recorded on the row, not lost
        log.exception("spark job %s failed", job_id)
        _finish(job_id, Job.FAILED, {"error": f"{type(exc).__name__}: {exc}"}, progress)
        return {"job": job_id, "status": Job.FAILED}


class _Engines:
    """Picks the engine for a job's size (``settings.SPARK_LOCAL_THRESHOLD_BYTES``); the SparkSession is built
    only when Spark is picked."""

    def __init__(self, spark: Any = None) -> None:
        self.spark = spark

    def pick(self, bytes_in_range: int) -> Any:
        if choose_engine(bytes_in_range, int(settings.SPARK_LOCAL_THRESHOLD_BYTES)) == ENGINE_WORKER:
            return InProcess()
        if self.spark is None:
            self.spark = session()
        return self.spark


def _bytes_in_range(manifest: dict[str, Any]) -> int:
    return int(manifest.get("totalBytes") or sum(int(s["bound"]) for s in manifest.get("segments", [])))


def _each_broker(targets: dict[str, str], begin_ms: int | None, end_ms: int | None, progress: _Progress,
                 engines: _Engines, fn: Any) -> dict[str, Any]:
    """Snapshots of every broker's store-time range, then ``fn(name, manifest, engine)`` per broker on the engine
    their total size calls for; every snapshot is released afterwards. Returns ``{"engine", "bytes_in_range"}``."""
    admin = broker_client.admin()
    manifests: dict[str, dict[str, Any]] = {}
    try:
        for name, addr in targets.items():
            if progress.cancel_requested():
                raise JobCancelled("cancelled before the next broker")
            manifest = admin.snapshot_segments(addr, begin_ms=begin_ms, end_ms=end_ms)
            # executors that cannot open the snapshot's files fetch them from this broker (spark_jobs.remote)
            manifests[name] = {**manifest, "brokerAddr": addr,
                               "preferLocal": settings.SPARK_SEGMENT_READS != "network"}
        size = sum(_bytes_in_range(m) for m in manifests.values())
        engine = engines.pick(size)
        progress.spark = engine
        for name, manifest in manifests.items():
            if progress.cancel_requested():
                raise JobCancelled("cancelled before the next broker")
            progress.start_broker(name)
            progress.save(progress.state())
            fn(name, manifest, engine)
            progress.end_broker()
        return {"engine": engine_name(engine), "bytes_in_range": size}
    finally:
        for name, manifest in manifests.items():
            try:
                admin.release_snapshot(targets[name], manifest["snapshotId"])
            except (ConnectionError, TimeoutError, OSError) as exc:  # the broker's TTL removes it anyway
                log.warning("could not release snapshot %s on %s: %s", manifest.get("snapshotId"), name, exc)


def _run_search(job: Job, targets: dict[str, str], engines: _Engines, progress: _Progress) -> dict[str, Any]:
    from spark_jobs.jobs.search import run_search

    spec = dict(job.params["spec"])
    if spec.get("limit") is None:
        spec["limit"] = DEFAULT_MAX_ROWS
    limit = int(spec["limit"])
    per_broker: dict[str, Any] = {}
    totals = {"scanned": 0, "matched": 0, "records_read": 0, "bytes_scanned": 0, "segments": 0, "rows": 0}
    t0 = time.monotonic()
    with spark_results.search_writer(job.pk) as writer:

        def one(name: str, manifest: dict[str, Any], engine: Any) -> None:
            res = run_search(engine, manifest, spec, progress=progress, job_group=progress.group)
            keep = res.rows[:max(0, limit - totals["rows"])]
            for row in keep:
                writer.write(row, broker=name)
            per_broker[name] = {**res.summary(), "rows": len(keep), "snapshot": manifest.get("snapshotId")}
            for k in ("scanned", "matched", "records_read", "bytes_scanned", "segments"):
                totals[k] += int(getattr(res, k))
            totals["rows"] += len(keep)

        chosen = _each_broker(targets, spec.get("begin_ms"), spec.get("end_ms"), progress, engines, one)
    return {**totals, **chosen, "truncated": totals["rows"] < totals["matched"], "limit": limit, "brokers": per_broker,
            "files": spark_results.search_files(job.pk),
            "elapsed_s": round(time.monotonic() - t0, 3)}


_RECORD_FIELDS = ("topic", "queue_id", "queue_offset", "phy_offset", "store_size", "msg_id", "offset_msg_id",
                  "uniq_key", "keys", "tags", "born_timestamp", "store_timestamp", "reconsume_times", "segment",
                  "pos")


def _run_trace(job: Job, targets: dict[str, str], engines: _Engines, progress: _Progress) -> dict[str, Any]:
    from spark_jobs.jobs.trace import LIFECYCLE, run_trace, summarize_groups

    rank = {t: i for i, t in enumerate(LIFECYCLE)}

    p = job.params
    timeline: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    ids: list[str] = []
    per_broker: dict[str, Any] = {}
    totals = {"scanned": 0, "bytes_scanned": 0, "passes": 0, "events": 0}
    t0 = time.monotonic()

    def one(name: str, manifest: dict[str, Any], engine: Any) -> None:
        res = run_trace(engine, manifest, msg_id=p.get("msg_id") or None, key=p.get("key") or None,
                        begin_ms=p.get("begin_ms"), end_ms=p.get("end_ms"), progress=progress,
                        job_group=progress.group)
        timeline.extend({**step, "broker": step.get("broker") or name} for step in res.timeline)
        records.extend({"broker": name, **{k: r.get(k) for k in _RECORD_FIELDS}} for r in res.records)
        ids.extend(i for i in res.ids if i not in ids)
        totals["scanned"] += res.scanned
        totals["bytes_scanned"] += res.bytes_scanned
        totals["passes"] += res.passes
        totals["events"] += len(res.events)
        per_broker[name] = {"steps": len(res.timeline), "records": len(res.records), "events": len(res.events),
                            "scanned": res.scanned, "passes": res.passes, "torn": res.torn,
                            "snapshot": manifest.get("snapshotId")}

    chosen = _each_broker(targets, p.get("begin_ms"), p.get("end_ms"), progress, engines, one)
    timeline.sort(key=lambda s: (s["timestamp"], s["depth"], rank.get(s["type"], len(rank))))
    groups = summarize_groups(timeline)
    path = spark_results.write_trace(job.pk, {"msg_id": p.get("msg_id"), "key": p.get("key"), "ids": ids,
                                              "timeline": timeline, "groups": groups, "records": records})
    return {**totals, **chosen, "steps": len(timeline), "records": len(records), "ids": ids, "groups": sorted(groups),
            "brokers": per_broker, "files": {"trace": path}, "elapsed_s": round(time.monotonic() - t0, 3)}
