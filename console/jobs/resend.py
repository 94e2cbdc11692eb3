"""DLQ resend jobs: a :class:`Job` (kind ``dlq.resend``) run by a Celery worker, so it outlives the web process.

Web side (:func:`start_resend_job`): the Job row (``pending``) and its ``dlq.resend`` audit event are written in
one transaction; once committed, the task ``workers.dlq_resend`` is published by name
(:mod:`console.services.schedules_send`). Without a worker the job stays ``pending``; when Redis cannot be
reached it is ``failed`` with that error. :func:`retry_job` (the retry button) re-queues a failed job, a done one
with failed dead letters, or a running one whose worker stopped renewing its lease.

Worker side (:func:`run_resend_job`): the run claims the job under a lease (:mod:`console.jobs.resend_lease`),
resends its dead letters chunk by chunk through :mod:`console.jobs.resend_records` (each dead letter at most
once, unless the job was started with ``force``), and after each chunk saves ``progress`` and
``result["results"]`` and renews the lease. The end writes ``done`` (even when some dead letters failed: see the
per-message results) or ``failed`` (the job itself broke) and a ``dlq.resend.finish`` audit event.

A run killed mid-job (worker SIGKILLed, host lost) leaves the job ``running``. The job is picked up again by
(a) the same worker starting again (``worker_ready``: it takes over its previous life's runs at once), (b) a
redelivery of the task (``acks_late``; ``reject_on_worker_lost``) once the dead run's lease has expired, or
(c) the retry button. The new run redoes nothing: dead letters already resent by this job are read from their
records, and one whose send was not recorded is looked for on the broker before anything is sent.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from console.errors import ApiError
from console.jobs import resend_lease as lease
from console.jobs import states as job_states
from console.jobs.models import Job
from console.jobs.names import RESEND_KIND, TASK_DLQ_RESEND
from console.jobs.resend_records import LeaseLost, chunk_size, resend_chunk
from console.services.audit import record
from console.services.messages import check_resend
from console.services.schedules_send import send

log = logging.getLogger(__name__)

FINISH_ACTION = "dlq.resend.finish"
RETRY_ACTION = "dlq.resend.retry"


def _user(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


def start_resend_job(user: Any, group: str, offset_msg_ids: list[str], topic: str | None,
                     force: bool = False) -> Job:
    """Create a pending ``dlq.resend`` job, audit it, and queue it for a worker once committed."""
    check_resend(group, topic)
    params = {"group": group, "offset_msg_ids": offset_msg_ids, "topic": topic, "force": force}
    with transaction.atomic():
        job = Job.objects.create(kind=RESEND_KIND, target=group, total=len(offset_msg_ids), result={"results": []},
                                 params=params, user=_user(user))
        record(user, RESEND_KIND, group, before={"offset_msg_ids": offset_msg_ids, "topic": topic, "force": force},
               after={"job_id": job.pk, "status": Job.PENDING})
    _queue(job.pk)
    return job


def retry_job(user: Any, job: Job) -> Job:
    """Queue ``job`` again (see :func:`console.jobs.resend_lease.retryable`); a 409 when there is nothing to retry."""
    if not lease.retry(job.pk):
        job.refresh_from_db()
        raise ApiError(409, "not_retryable", f"job {job.pk} is {job.status}: only a failed job, a done one with "
                                             "failed dead letters, or a running one whose worker stopped can be "
                                             "retried")
    record(user, RETRY_ACTION, job.target, after={"job_id": job.pk})
    _queue(job.pk)
    job.refresh_from_db()
    return job


def _queue(job_id: int) -> None:
    transaction.on_commit(lambda: _send(job_id))


def _send(job_id: int) -> None:
    try:
        send(TASK_DLQ_RESEND, {"job_id": job_id})
    except ConnectionError as exc:
        job_states.fail_unqueued(job_id, f"could not queue the job: {exc}")


# ------------------------------------------------------------------------------------------------ worker side
def run_resend_job(job_id: int, hostname: str, take_over: str = "") -> dict[str, Any]:
    """Run (or resume) resend job ``job_id`` in this worker. Returns ``{"job", "status"}``; status ``busy`` (with
    ``retry_in`` seconds) when another run holds a live lease, ``skipped`` when the job is not runnable."""
    run = lease.run_id(hostname)
    if not lease.claim(job_id, run, take_over):
        left = lease.lease_left_s(job_id)
        return {"job": job_id, "status": "busy", "retry_in": left} if left > 0 else \
            {"job": job_id, "status": "skipped"}
    job = Job.objects.select_related("user").get(pk=job_id)
    p = job.params
    group, ids, topic, force = p["group"], list(p["offset_msg_ids"]), p.get("topic"), bool(p.get("force"))
    log.info("resend job %s: run %s on %d dead letters of %s", job_id, run, len(ids), group)
    results: list[dict[str, Any]] = []
    try:
        size = chunk_size()
        for i in range(0, len(ids), size):
            results += resend_chunk(group, ids[i:i + size], topic, force=force, job_id=job_id,
                                    keep_lease=lambda: lease.renew(job_id, run))
            if not lease.renew(job_id, run, progress=len(results), result={"results": results}):
                raise LeaseLost("another run took this job over")
    except LeaseLost:
        log.warning("resend job %s: run %s lost its lease; stopping", job_id, run)
        return {"job": job_id, "status": "lost"}
    except Exception as exc:  # the job itself broke (not a dead letter): record it, then let Celery see it
        log.exception("resend job %s failed", job_id)
        _finish(job, run, Job.FAILED, {"results": results, "error": str(exc)}, results)
        raise
    _finish(job, run, Job.DONE, {"results": results}, results)
    return {"job": job_id, "status": Job.DONE, "resent": sum(1 for r in results if r["ok"]),
            "failed": sum(1 for r in results if not r["ok"])}


def _finish(job: Job, run: str, status: str, result: dict[str, Any], results: list[dict[str, Any]]) -> None:
    if not lease.finish(job.pk, run, status, result, len(results)):
        return
    counts = {"resent": sum(1 for r in results if r["ok"] and not r.get("already_resent")),
              "already_resent": sum(1 for r in results if r.get("already_resent")),
              "recovered": sum(1 for r in results if r.get("recovered")),
              "failed": sum(1 for r in results if not r["ok"])}
    record(job.user, FINISH_ACTION, job.target, before={"job_id": job.pk},
           after={"job_id": job.pk, "status": status, **counts, "error": result.get("error"), "results": results},
           ok=status == Job.DONE and counts["failed"] == 0)


def orphaned_runs(hostname: str) -> list[tuple[int, str]]:
    """Resend runs a previous life of worker ``hostname`` left (see :func:`console.jobs.resend_lease.orphaned_runs`)."""
    return lease.orphaned_runs(hostname)
