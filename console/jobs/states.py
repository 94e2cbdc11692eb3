"""The one state machine of :class:`console.models.Job`, for every kind (DLQ resends in the web process, Spark
search and trace on the Spark worker). Each transition is a conditional UPDATE, so two processes racing on a
row (a cancel and a finishing worker, two workers claiming) change it at most once.

::

    pending --claim--> running --finish--> done | failed | cancelled
    pending --request_cancel--> cancelled        running --request_cancel--> cancelling --finish--> ...
    pending --fail_unqueued--> failed            running | cancelling --fail_orphaned--> failed
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from console.jobs.models import Job

ACTIVE = (Job.PENDING, Job.RUNNING, Job.CANCELLING)
ENDED = (Job.DONE, Job.FAILED, Job.CANCELLED)


def claim(job_id: int) -> bool:
    """pending -> running; False when the job is not pending (another worker has it, or it was cancelled)."""
    return bool(Job.objects.filter(pk=job_id, status=Job.PENDING).update(status=Job.RUNNING))


def finish(job_id: int, status: str, result: dict[str, Any], **fields: Any) -> None:
    """An active job ends as ``status`` (done, failed or cancelled) with its final ``result`` (and progress
    ``fields``); a job that already ended is left as it is."""
    if status not in ENDED:
        raise ValueError(f"a job ends as one of {ENDED}, not {status!r}")
    Job.objects.filter(pk=job_id, status__in=ACTIVE).update(status=status, finished=timezone.now(), result=result,
                                                           **fields)


def fail_unqueued(job_id: int, error: str) -> None:
    """pending -> failed: the job could not be handed to a worker."""
    Job.objects.filter(pk=job_id, status=Job.PENDING).update(status=Job.FAILED, finished=timezone.now(),
                                                            result={"error": error})


def request_cancel(job_id: int) -> str | None:
    """pending -> cancelled, running -> cancelling (the worker stops and finishes it as cancelled); returns the
    status now, or None when the job had already ended."""
    if Job.objects.filter(pk=job_id, status=Job.PENDING).update(status=Job.CANCELLED, finished=timezone.now()):
        return Job.CANCELLED
    if Job.objects.filter(pk=job_id, status=Job.RUNNING).update(status=Job.CANCELLING):
        return Job.CANCELLING
    status = Job.objects.filter(pk=job_id).values_list("status", flat=True).first()
    return Job.CANCELLING if status == Job.CANCELLING else None


def cancel_requested(job_id: int) -> bool:
    return Job.objects.filter(pk=job_id, status=Job.CANCELLING).exists()


def fail_orphaned(kinds: tuple[str, ...], worker: str, error: str) -> list[int]:
    """running | cancelling -> failed for the jobs of ``kinds`` that ``worker`` claimed (its name is in the
    result) and never finished. Returns their ids."""
    stale = Job.objects.filter(kind__in=kinds, status__in=(Job.RUNNING, Job.CANCELLING), result__worker=worker)
    ids = sorted(stale.values_list("pk", flat=True))
    for job in Job.objects.filter(pk__in=ids):
        Job.objects.filter(pk=job.pk, status__in=(Job.RUNNING, Job.CANCELLING)).update(
            status=Job.FAILED, finished=timezone.now(), result={**job.result, "error": error})
    return ids
