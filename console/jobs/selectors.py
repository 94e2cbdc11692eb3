"""Background job reads."""

from __future__ import annotations

from typing import Any

from console.errors import not_found
from console.jobs.models import Job


def job_json(job: Job) -> dict[str, Any]:
    """The API shape of one job."""
    return {"id": job.pk, "kind": job.kind, "target": job.target, "status": job.status,
            "created": job.created.isoformat(), "finished": job.finished.isoformat() if job.finished else None,
            "progress": job.progress, "total": job.total, "params": job.params, "result": job.result,
            "user": job.user.get_username() if job.user else None}


def get_job(job_id: str) -> Job:
    """The job with id ``job_id`` (a string from the URL), or a 404."""
    valid = job_id.isdigit() and len(job_id) <= 18
    job = Job.objects.select_related("user").filter(pk=int(job_id)).first() if valid else None
    if job is None:
        raise not_found(f"no job {job_id}")
    return job
