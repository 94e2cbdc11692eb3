"""Reads of the scheduled jobs and their runs, and of the disk state the red banner shows.

A scheduled job is a django-celery-beat :class:`PeriodicTask` whose task is ``workers.<job>``; ``<job>`` is
its name in URLs and the ``job`` of its :class:`JobRun` rows (``workers.retention`` -> ``retention``). Other
periodic tasks (Celery's own) are not listed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Subquery
from django_celery_beat.models import PeriodicTask

from console.errors import not_found
from console.jobs.names import TASK_PREFIX
from console.monitoring.models import RAW_BUCKET, BrokerSample, JobRun

DISK_CHECK_JOB = "disk_check"
# diskSpaceWarningLevelRatio's default: at or past it the broker refuses writes
DISK_WARNING_RATIO = 0.90
# the counts a run page shows first, in this order, when a run has them
HEADLINE_COUNTS = ("files_deleted", "bytes_freed", "delivered", "oldest_overdue_ms", "disk_ratio", "state",
                   "lag_samples", "topic_samples", "broker_samples", "samples_downsampled", "samples_pruned",
                   "runs_pruned", "fanned_out")


def job_name(task: str) -> str:
    return task[len(TASK_PREFIX):] if task.startswith(TASK_PREFIX) else ""


def run_json(run: JobRun) -> dict[str, Any]:
    return {"id": run.pk, "job": run.job, "broker": run.broker, "started": run.started.isoformat(),
            "finished": run.finished.isoformat(), "duration_ms": run.duration_ms, "outcome": run.outcome,
            "counts": run.counts, "error": run.error}


def headline(counts: dict[str, Any]) -> list[tuple[str, Any]]:
    """The counts worth showing in a table cell, in a fixed order; ratios as percentages (``91.2%``)."""
    return [(k, f"{counts[k] * 100:.1f}%" if k.endswith("ratio") and isinstance(counts[k], float) else counts[k])
            for k in HEADLINE_COUNTS if k in counts]


def schedule_json(task: PeriodicTask) -> dict[str, Any]:
    if task.interval is not None:
        every, period = task.interval.every, task.interval.period
        unit = period[:-1] if every == 1 else period
        return {"kind": "interval", "every": every, "period": period, "text": f"every {every} {unit}"}
    sched = task.crontab or task.solar or task.clocked
    return {"kind": "other", "every": None, "period": None, "text": str(sched) if sched else "-"}


def _job_json(task: PeriodicTask, runs: int) -> dict[str, Any]:
    name = job_name(task.task)
    recent = [run_json(r) for r in JobRun.objects.filter(job=name).order_by("-started", "-id")[:runs]]
    failure = JobRun.objects.filter(job=name, outcome=JobRun.FAILED).order_by("-started", "-id").first()
    return {"name": name, "task": task.task, "periodic_task": task.name, "description": task.description,
            "enabled": task.enabled, "schedule": schedule_json(task),
            "last_run_at": task.last_run_at.isoformat() if task.last_run_at else None,
            "total_run_count": task.total_run_count, "last_runs": recent,
            "last_failure": run_json(failure) if failure else None}


def _tasks() -> Any:
    return PeriodicTask.objects.filter(task__startswith=TASK_PREFIX).select_related(
        "interval", "crontab", "solar", "clocked")


def periodic_task(name: str) -> PeriodicTask:
    """The :class:`PeriodicTask` of job ``name``, or a 404."""
    task = _tasks().filter(task=TASK_PREFIX + name).order_by("id").first() if name else None
    if task is None:
        raise not_found(f"no scheduled job {name!r}")
    return task


def scheduled_jobs(runs: int = 5) -> list[dict[str, Any]]:
    """Every scheduled job (sorted by name) with its schedule and its newest ``runs`` runs."""
    return sorted((_job_json(t, runs) for t in _tasks() if job_name(t.task)), key=lambda j: j["name"])


def scheduled_job(name: str, runs: int = 5) -> dict[str, Any]:
    return _job_json(periodic_task(name), runs)


def job_runs(name: str, *, broker: str | None = None, outcome: str | None = None,
             limit: int = 100) -> list[dict[str, Any]]:
    """Job ``name``'s runs, newest first (404 when no such scheduled job)."""
    periodic_task(name)
    runs = JobRun.objects.filter(job=name)
    if broker is not None:
        runs = runs.filter(broker=broker)
    if outcome:
        runs = runs.filter(outcome=outcome)
    return [run_json(r) for r in runs.order_by("-started", "-id")[:limit]]


# ---------------------------------------------------------------------------------------------- disk banner
def disk_alerts() -> list[dict[str, Any]]:
    """Brokers whose newest disk reading is at or past the refusal ratio: ``[{"broker", "ratio",
    "warning_ratio", "at"}]``. The newest reading per broker is its latest disk-check run that measured the
    disk, or its latest raw :class:`BrokerSample`, whichever is newer. Two indexed queries."""
    newest_run = (JobRun.objects.filter(job=DISK_CHECK_JOB, broker=OuterRef("broker"), counts__has_key="disk_ratio")
                  .order_by("-started", "-id").values("id")[:1])
    readings: dict[str, tuple[Any, float, float]] = {}
    for run in JobRun.objects.filter(id__in=Subquery(
            JobRun.objects.filter(job=DISK_CHECK_JOB).values("broker").distinct().annotate(
                newest=Subquery(newest_run)).values("newest"))):
        ratio = run.counts.get("disk_ratio")
        if isinstance(ratio, int | float) and ratio >= 0:
            warning = run.counts.get("warning_ratio")
            readings[run.broker] = (run.finished, float(ratio),
                                    float(warning) if isinstance(warning, int | float) else DISK_WARNING_RATIO)
    newest_sample = (BrokerSample.objects.filter(broker=OuterRef("broker"), bucket_seconds=RAW_BUCKET,
                                                 disk_ratio__isnull=False)
                     .order_by("-timestamp", "-id").values("id")[:1])
    for sample in BrokerSample.objects.filter(id__in=Subquery(
            BrokerSample.objects.filter(bucket_seconds=RAW_BUCKET).values("broker").distinct().annotate(
                newest=Subquery(newest_sample)).values("newest"))):
        known = readings.get(sample.broker)
        if sample.disk_ratio is not None and (known is None or sample.timestamp > known[0]):
            readings[sample.broker] = (sample.timestamp, float(sample.disk_ratio),
                                       known[2] if known else DISK_WARNING_RATIO)
    return [{"broker": broker, "ratio": ratio, "percent": round(ratio * 100, 1), "warning_ratio": warning,
             "warning_percent": round(warning * 100, 1), "at": at.isoformat()}
            for broker, (at, ratio, warning) in sorted(readings.items()) if ratio >= warning]
