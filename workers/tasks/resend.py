"""The DLQ resend task (thin: :func:`console.jobs.resend.run_resend_job` does the work).

``acks_late`` with ``reject_on_worker_lost``: the task message is acknowledged only when a run returns, so a
worker killed mid-job leaves it in Redis to be delivered again (after the transport's visibility timeout, or at
once when a prefork child is lost). A delivery that finds the job held by a live run retries once that run's
lease would have expired; one for a job already finished does nothing.

A worker starting again takes over, at once, the resend runs its previous life (same hostname) left running
(:func:`resume_orphaned_resends`), instead of waiting for their leases to expire.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from console.jobs import resend
from console.jobs.names import TASK_DLQ_RESEND

log = logging.getLogger(__name__)
MAX_BUSY_RETRIES = 100


@shared_task(bind=True, name=TASK_DLQ_RESEND, acks_late=True, reject_on_worker_lost=True,
             max_retries=MAX_BUSY_RETRIES)
def dlq_resend(self: Task, job_id: int, take_over: str = "") -> dict[str, Any]:
    out = resend.run_resend_job(int(job_id), self.request.hostname or "worker", take_over)
    if out["status"] == "busy":
        raise self.retry(countdown=max(1.0, float(out["retry_in"])))
    return out


@worker_ready.connect
def resume_orphaned_resends(sender: Any, **kwargs: Any) -> None:
    """Queue the resend runs this worker's previous life left running, each allowed to take over that run."""
    for job_id, run in resend.orphaned_runs(sender.hostname):
        log.warning("resend job %s: resuming the run %s of this worker's previous life", job_id, run)
        dlq_resend.apply_async(kwargs={"job_id": job_id, "take_over": run})
