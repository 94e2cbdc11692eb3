"""The scheduled jobs' logic: each ``run_*`` asks the brokers for one maintenance operation through the SDK
(the console's :mod:`console.broker_client`) and records the run as a :class:`~console.monitoring.models.JobRun`.

The broker decides what to do: retention applies the seeds' ``deleteWhen`` / ``fileReservedTime`` / disk-ratio
rules itself, so calling it more often than hourly is correct and idempotent; delay-level delivery delivers
only what is due. Every run of a job on a broker holds that (job, broker)'s Redis lock
(:mod:`workers.locks`); a run that finds it held is recorded as ``skipped``.

Errors: a broker or name server that cannot be reached (``ConnectionError``, ``TimeoutError``) is recorded as
a failed run and re-raised, so the Celery task retries with back-off; a request the broker refuses
(``ClientError``) or a broker name the name server does not know is recorded as failed and not retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from broker_core.client import ClientError
from console import broker_client
from console.monitoring import controller_sampling, sampling
from console.monitoring.models import JobRun
from workers.locks import job_lock

RETENTION, DISK_CHECK, DELIVER_DELAYED, SAMPLE_LAG, PRUNE = (
    "retention", "disk_check", "deliver_delayed", "sample_lag", "prune")
SAMPLE_CONTROLLER = "sample_controller"
JOBS = (RETENTION, DISK_CHECK, DELIVER_DELAYED, SAMPLE_LAG, PRUNE, SAMPLE_CONTROLLER)


def job_runs_keep() -> int:
    """How many runs of each (job, broker) are kept (``WORKERS_JOB_RUNS_KEEP``, default 200)."""
    return int(getattr(settings, "WORKERS_JOB_RUNS_KEEP", 200))


class UnknownBroker(LookupError):
    """The name server has no master address for this broker name."""


# ---------------------------------------------------------------------------------------------- plumbing
def broker_addrs() -> dict[str, str]:
    """``{broker name: master address}`` of every broker registered with the name server."""
    table = broker_client.admin().cluster_info().get("brokerAddrTable", {})
    return {name: data["brokerAddrs"]["0"] for name, data in sorted(table.items())
            if "0" in data.get("brokerAddrs", {})}


def fan_out_targets(job: str) -> dict[str, str]:
    """:func:`broker_addrs` for a beat tick of ``job``; a name server that cannot be reached is recorded as a
    failed run of ``job`` with no broker, and re-raised for the task's retry."""
    started, t0 = timezone.now(), time.monotonic()
    try:
        return broker_addrs()
    except (ConnectionError, TimeoutError) as exc:
        _record(job, "", started, t0, JobRun.FAILED, {}, f"name server: {type(exc).__name__}: {exc}")
        raise


def _addr(broker: str, addr: str | None) -> str:
    if addr:
        return addr
    found = broker_addrs().get(broker)
    if found is None:
        raise UnknownBroker(f"broker {broker!r} is not registered with the name server")
    return found


def _record(job: str, broker: str, started: Any, t0: float, outcome: str, counts: dict[str, Any],
            error: str = "") -> JobRun:
    run = JobRun.objects.create(job=job, broker=broker, started=started, finished=timezone.now(),
                                duration_ms=int((time.monotonic() - t0) * 1000), outcome=outcome,
                                counts=counts, error=error)
    prune_runs(job, broker)
    return run


def prune_runs(job: str, broker: str, keep: int | None = None) -> int:
    """Delete all but the newest ``keep`` runs of ``job`` on ``broker``; returns how many were deleted."""
    keep = job_runs_keep() if keep is None else keep
    runs = JobRun.objects.filter(job=job, broker=broker)
    newest = list(runs.order_by("-started", "-id").values_list("id", flat=True)[:keep + 1])
    if len(newest) <= keep:
        return 0
    return runs.exclude(id__in=newest[:keep]).delete()[0]


def run_locked(job: str, broker: str, body: Callable[[], tuple[dict[str, Any], str]]) -> JobRun:
    """Run ``body`` (returning counts and an error text, empty when the run went well) under the lock of
    ``job`` on ``broker`` and record the run. See the module docstring for how errors are recorded."""
    started, t0 = timezone.now(), time.monotonic()
    with job_lock(job, broker) as held:
        if not held:
            return _record(job, broker, started, t0, JobRun.SKIPPED, {},
                           "skipped: another run of this job on this broker holds the lock")
        try:
            counts, error = body()
        except (ConnectionError, TimeoutError) as exc:
            _record(job, broker, started, t0, JobRun.FAILED, {}, f"{type(exc).__name__}: {exc}")
            raise
        except (ClientError, UnknownBroker) as exc:
            return _record(job, broker, started, t0, JobRun.FAILED, {}, f"{type(exc).__name__}: {exc}")
        return _record(job, broker, started, t0, JobRun.FAILED if error else JobRun.OK, counts, error)


# ---------------------------------------------------------------------------------------------- broker jobs
def run_retention(broker: str, addr: str | None = None) -> JobRun:
    """One retention pass on ``broker``: the broker deletes what its rules say is expired (at most 10 CommitLog
    segments a pass, then the ConsumeQueue and index files below the new minimum)."""
    def body() -> tuple[dict[str, Any], str]:
        report = broker_client.admin().clean_expired_files(_addr(broker, addr))
        disk = report.get("disk") or {}
        return {
            "files_deleted": int(report["files_deleted"]),
            "commit_log_files_deleted": len(report["deleted_commit_log_files"]),
            "consume_queue_files_deleted": int(report["deleted_consume_queue_files"]),
            "index_files_deleted": int(report["deleted_index_files"]),
            "bytes_freed": int(report["bytes_freed"]),
            "triggers": list(report["triggers"]),
            "commit_log_min_offset": int(report["commit_log_min_offset"]),
            "disk_ratio": disk.get("ratio"),
        }, ""
    return run_locked(RETENTION, broker, body)


def disk_state(check: dict[str, Any]) -> str:
    """``ok``, ``clean`` (past diskMaxUsedSpaceRatio), ``clean_forcibly`` (past 85 %), ``full`` (past the
    warning ratio, 90 %: the broker refuses writes) or ``unknown`` (the usage could not be read)."""
    ratio = float(check["ratio"])
    if ratio < 0:
        return "unknown"
    if check.get("disk_full") or ratio >= float(check["warning_ratio"]):
        return "full"
    if ratio > float(check["clean_forcibly_ratio"]):
        return "clean_forcibly"
    if ratio > float(check["max_used_ratio"]):
        return "clean"
    return "ok"


def run_disk_check(broker: str, addr: str | None = None) -> JobRun:
    """Ask ``broker`` to measure its store's disk (which also sets or clears its disk-full flag). A disk at or
    past the warning ratio is a failed run, so the console shows a red banner until a run is ok again."""
    def body() -> tuple[dict[str, Any], str]:
        check = broker_client.admin().check_disk(_addr(broker, addr))
        state = disk_state(check)
        counts = {"disk_ratio": check["ratio"], "state": state, "disk_full": bool(check["disk_full"]),
                  "clean_immediately": bool(check["clean_immediately"]),
                  "space_to_delete": bool(check["space_to_delete"]), "warning_ratio": check["warning_ratio"]}
        error = ""
        if state == "full":
            error = (f"disk use {float(check['ratio']):.1%} is at or past {float(check['warning_ratio']):.0%}: "
                     "the broker refuses writes")
        elif state == "unknown":
            error = "the broker cannot read its disk usage"
        return counts, error
    return run_locked(DISK_CHECK, broker, body)


def run_delay_delivery(broker: str, addr: str | None = None) -> JobRun:
    """Ask ``broker`` to deliver every delayed message that is due; records how many and the oldest overdue
    age (how late the most overdue message was)."""
    def body() -> tuple[dict[str, Any], str]:
        report = broker_client.admin().deliver_delayed(_addr(broker, addr))
        return {"delivered": int(report["delivered"]), "skipped_duplicates": int(report["skipped_duplicates"]),
                "oldest_overdue_ms": int(report["oldest_overdue_ms"]),
                "per_level": {str(k): int(v) for k, v in report.get("per_level", {}).items()}}, ""
    return run_locked(DELIVER_DELAYED, broker, body)


# ---------------------------------------------------------------------------------------------- cluster jobs
def run_sampling() -> JobRun:
    """One sampling pass (:func:`console.monitoring.sampling.sample_all`): broker disk and rates, lag in messages and
    seconds per (known group, topic) with DLQ sizes, topic rates."""
    def body() -> tuple[dict[str, Any], str]:
        return sampling.sample_all(broker_addrs()), ""
    return run_locked(SAMPLE_LAG, "", body)


def run_controller_sampling() -> JobRun | None:
    """One pass of :func:`console.monitoring.controller_sampling.sample_controller` (controller mode's master,
    epochs and SyncStateSet, and the elections between passes); None without ``BROKER_CORE_CONTROLLER``."""
    if not broker_client.controller_addr():
        return None

    def body() -> tuple[dict[str, Any], str]:
        return controller_sampling.sample_controller(), ""
    return run_locked(SAMPLE_CONTROLLER, "", body)


def prune_samples(older_than: timedelta | None = None) -> int:
    """Delete samples of every kind older than ``older_than`` (default: the kept days)."""
    cutoff = timezone.now() - (older_than or timedelta(days=sampling.sample_days()))
    return sum(m.objects.filter(timestamp__lt=cutoff).delete()[0] for m in sampling.SAMPLE_SHAPES)


def run_prune() -> JobRun:
    """The hourly clean-up: raw samples past ``WORKERS_SAMPLE_RAW_HOURS`` become hourly averages, samples past
    their days are deleted, and each (job, broker)'s runs beyond the kept number are deleted (brokers that no
    longer run jobs keep their last runs until then)."""
    def body() -> tuple[dict[str, Any], str]:
        counts: dict[str, Any] = sampling.downsample_and_prune()
        counts["runs_pruned"] = sum(prune_runs(job, broker) for job, broker in
                                    JobRun.objects.values_list("job", "broker").distinct())
        return counts, ""
    return run_locked(PRUNE, "", body)


def summary(run: JobRun) -> dict[str, Any]:
    """What a task returns: the run's id, job, broker, outcome, counts and error."""
    return {"run_id": run.pk, "job": run.job, "broker": run.broker, "outcome": run.outcome,
            "duration_ms": run.duration_ms, "counts": run.counts, "error": run.error}
