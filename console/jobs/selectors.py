"""Background job reads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.errors import not_found
from console.jobs.models import Job
from console.jobs.names import RESEND_KIND


def resend_lease() -> timedelta:
    return timedelta(seconds=float(settings.DLQ_RESEND_LEASE_S))


def is_stale(job: Job) -> bool:
    """A running resend job whose run stopped renewing its lease (its worker died or hangs)."""
    return job.kind == RESEND_KIND and job.status == Job.RUNNING and (
        job.heartbeat is None or job.heartbeat < timezone.now() - resend_lease())


def retryable(job: Job) -> bool:
    """What a resend job's retry offers: a failed job, a done one with failed dead letters, or a stale one."""
    if job.kind != RESEND_KIND:
        return False
    if job.status == Job.FAILED or is_stale(job):
        return True
    results = (job.result or {}).get("results", []) if job.status == Job.DONE else []
    return any(not r.get("ok") for r in results)


def job_json(job: Job) -> dict[str, Any]:
    """The API shape of one job (``worker``, ``heartbeat``, ``stale`` and ``retryable``: a resend job's run)."""
    return {"id": job.pk, "kind": job.kind, "target": job.target, "status": job.status,
            "created": job.created.isoformat(), "finished": job.finished.isoformat() if job.finished else None,
            "progress": job.progress, "total": job.total, "params": job.params, "result": job.result,
            "user": job.user.get_username() if job.user else None, "worker": job.worker or None,
            "heartbeat": job.heartbeat.isoformat() if job.heartbeat else None, "stale": is_stale(job),
            "retryable": retryable(job)}


def get_job(job_id: str) -> Job:
    """The job with id ``job_id`` (a string from the URL), or a 404."""
    valid = job_id.isdigit() and len(job_id) <= 18
    job = Job.objects.select_related("user").filter(pk=int(job_id)).first() if valid else None
    if job is None:
        raise not_found(f"no job {job_id}")
    return job
