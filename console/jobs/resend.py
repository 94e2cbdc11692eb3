"""Background jobs: a :class:`Job` row tracks an operation that runs in a thread of the web process.

Today the one kind is ``dlq.resend``: dead letters are resent in chunks, and after each chunk the job's
``progress`` and per-message ``result["results"]`` are saved, so ``GET /jobs/{id}/`` shows it as it goes. When
the job ends one ``dlq.resend`` audit event records every outcome. A job whose process dies stays
``running``; nothing resumes it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import close_old_connections, connection, transaction

from console import broker_client
from console.jobs import states as job_states
from console.jobs.models import Job
from console.services.audit import RECORDED_ERRORS, record
from console.services.messages import check_resend, resend_result

log = logging.getLogger(__name__)

RESEND_KIND = "dlq.resend"
RESEND_CHUNK = 16  # dead letters per broker request, and per progress update

_threads: dict[int, threading.Thread] = {}
_threads_lock = threading.Lock()


def start_resend_job(user: Any, group: str, offset_msg_ids: list[str], topic: str | None) -> Job:
    """Create a pending ``dlq.resend`` job and start it in a background thread once the row is committed."""
    check_resend(group, topic)
    job = Job.objects.create(kind=RESEND_KIND, target=group, total=len(offset_msg_ids), result={"results": []},
                             params={"group": group, "offset_msg_ids": offset_msg_ids, "topic": topic},
                             user=user if getattr(user, "is_authenticated", False) else None)
    transaction.on_commit(lambda: _start(job.pk, _run_resend))
    return job


def _start(job_id: int, target: Any) -> None:
    thread = threading.Thread(target=target, args=(job_id,), name=f"console-job-{job_id}", daemon=True)
    with _threads_lock:
        _threads[job_id] = thread
    thread.start()


def wait(job_id: int, timeout: float | None = None) -> bool:
    """Wait for the thread of job ``job_id`` started by this process; False if it is still running."""
    with _threads_lock:
        thread = _threads.get(job_id)
    if thread is not None:
        thread.join(timeout)
        if thread.is_alive():
            return False
        with _threads_lock:
            _threads.pop(job_id, None)
    return True


def _run_resend(job_id: int) -> None:
    close_old_connections()
    try:
        if not job_states.claim(job_id):
            return
        job = Job.objects.select_related("user").get(pk=job_id)
        group, ids, topic = job.params["group"], job.params["offset_msg_ids"], job.params.get("topic")
        results: list[dict[str, Any]] = []
        try:
            for i in range(0, len(ids), RESEND_CHUNK):
                chunk = ids[i:i + RESEND_CHUNK]
                try:
                    raw = broker_client.admin().resend_dead_letters(group, chunk, topic)
                    results += [resend_result(r) for r in raw]
                except RECORDED_ERRORS as exc:  # this chunk failed; record it per message and go on
                    results += [{"offset_msg_id": oid, "ok": False, "topic": None, "new_msg_id": None,
                                 "new_offset_msg_id": None, "error": str(exc)} for oid in chunk]
                job.progress, job.result = len(results), {"results": results}
                job.save(update_fields=["progress", "result"])
            job.status = Job.DONE
        except Exception as exc:
            log.exception("job %s failed", job_id)
            job.status, job.result = Job.FAILED, {"results": results, "error": str(exc)}
        job_states.finish(job_id, job.status, job.result, progress=len(results))
        record(job.user, RESEND_KIND, group, before={"offset_msg_ids": ids, "topic": topic, "job_id": job_id},
               after={"job_id": job_id, "status": job.status, "results": results},
               ok=job.status == Job.DONE and all(r["ok"] for r in results))
    finally:
        connection.close()
