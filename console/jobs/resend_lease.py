"""The lease of a DLQ resend job's run: which worker process holds a ``dlq.resend`` job, and until when.

A run names itself ``<celery hostname>:<pid>:<random>`` (:func:`run_id`). Its status changes are conditional
UPDATEs (the same discipline as :mod:`console.jobs.states`), so two deliveries of the same task never both run
the job::

    pending --claim--> running(worker=W, heartbeat=now)
    running, heartbeat older than the lease --claim--> running(worker=W')      (W died or hangs)
    running(worker=W) --claim(take_over=W)--> running(worker=W')                (W's host restarted: W is dead)
    running(worker=W) --renew by W--> running(heartbeat=now)                    (False: W lost it and stops)
    running(worker=W) --finish by W--> done | failed
    failed | done --retry--> pending            running, lease expired --retry--> (re-queued as it is)

Invariant: at most one live run per job, as long as a run renews its lease more often than
``DLQ_RESEND_LEASE_S`` (one chunk of dead letters between renewals, each broker call bounded by the SDK's
timeout). A run that loses its lease stops before its next chunk; the dead letters themselves are protected
from double sends by their own records (:mod:`console.jobs.resend_records`), not by this lease alone.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from django.db.models import Q
from django.utils import timezone

from console.jobs.models import Job
from console.jobs.names import RESEND_KIND
from console.jobs.selectors import resend_lease as lease
from console.jobs.selectors import retryable


def run_id(hostname: str) -> str:
    """A name for one run in this process: unique even if a restarted worker gets the same pid."""
    return f"{hostname}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _jobs() -> Any:
    return Job.objects.filter(kind=RESEND_KIND)


def claim(job_id: int, worker: str, take_over: str = "") -> bool:
    """Take job ``job_id`` for the run ``worker`` (see the module docstring); False when it is not claimable."""
    now = timezone.now()
    stale = Q(status=Job.RUNNING) & (Q(heartbeat__isnull=True) | Q(heartbeat__lt=now - lease()))
    claimable = Q(status=Job.PENDING) | stale
    if take_over:
        claimable |= Q(status=Job.RUNNING, worker=take_over)
    return bool(_jobs().filter(claimable, pk=job_id).update(status=Job.RUNNING, worker=worker, heartbeat=now))


def renew(job_id: int, worker: str, **fields: Any) -> bool:
    """Extend ``worker``'s lease (and save ``fields``: progress, result); False when it no longer holds it."""
    return bool(_jobs().filter(pk=job_id, status=Job.RUNNING, worker=worker).update(heartbeat=timezone.now(),
                                                                                    **fields))


def finish(job_id: int, worker: str, status: str, result: dict[str, Any], progress: int) -> bool:
    """``worker``'s run ends the job as ``status`` (done or failed); False when it had lost the job."""
    if status not in (Job.DONE, Job.FAILED):
        raise ValueError(f"a resend job ends done or failed, not {status!r}")
    return bool(_jobs().filter(pk=job_id, status=Job.RUNNING, worker=worker).update(
        status=status, finished=timezone.now(), result=result, progress=progress))


def lease_left_s(job_id: int) -> float:
    """Seconds until the lease of job ``job_id``'s current run expires (0 when it has none or has expired)."""
    beat = _jobs().filter(pk=job_id, status=Job.RUNNING).values_list("heartbeat", flat=True).first()
    if beat is None:
        return 0.0
    return max(0.0, (beat + lease() - timezone.now()).total_seconds())


def retry(job_id: int) -> bool:
    """Make job ``job_id`` runnable again: failed | done -> pending; a stale running job stays running (the next
    delivery claims it, its lease having expired). False when it is not :func:`retryable`."""
    job = _jobs().filter(pk=job_id).first()
    if job is None or not retryable(job):
        return False
    if job.status == Job.RUNNING:
        return True
    return bool(_jobs().filter(pk=job_id, status=job.status).update(status=Job.PENDING, finished=None))


def orphaned_runs(hostname: str) -> list[tuple[int, str]]:
    """``(job id, run)`` of the resend jobs a previous life of the worker ``hostname`` left running."""
    rows = _jobs().filter(status=Job.RUNNING, worker__startswith=f"{hostname}:").values_list("pk", "worker")
    return [(int(pk), str(w)) for pk, w in rows]
