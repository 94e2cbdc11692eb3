"""Starting and cancelling the Spark jobs behind the search and trace pages.

A job is a :class:`console.models.Job` (kind ``spark.search`` or ``spark.trace``) created ``pending``; once the
row is committed its Celery task (``workers.spark_search`` / ``workers.spark_trace``, routed to the ``spark``
queue) is published by name through :mod:`console.services.schedules_send` (:mod:`console.celery_client`, the one
console module that imports Celery). A worker runs it (:mod:`workers.spark_jobs_service`) and writes progress and
results to the row. Without a worker the job stays ``pending``; when Redis cannot be reached the job is ``failed``
with that error.

Search specs are checked here with the engine's own compiler (:class:`spark_jobs.transforms.filters.Compiled`,
pure Python, no Spark): a bad regex, JSON path or hex string is a 400 before anything is queued.

Cancel: a pending job becomes ``cancelled`` at once; a running one ``cancelling``, which the worker's progress
callback turns into a Spark cancel and then ``cancelled``.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from console.errors import ApiError, bad_request
from console.jobs import states as job_states
from console.jobs.models import Job
from console.jobs.names import SEARCH_KIND, TASK_SPARK_SEARCH, TASK_SPARK_TRACE, TRACE_KIND
from console.services.audit import record
from console.services.schedules_send import send
from spark_jobs.transforms.filters import Compiled, SearchSpec

TASKS = {SEARCH_KIND: TASK_SPARK_SEARCH, TRACE_KIND: TASK_SPARK_TRACE}
ACTIVE = job_states.ACTIVE


def _user(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


def check_search_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the engine will read it, or a 400 naming what is wrong."""
    try:
        parsed = SearchSpec.from_dict(spec)
        Compiled(parsed)
    except re.error as exc:
        field = "body_regex_bytes" if spec.get("body_regex_bytes") else "body_regex"
        raise bad_request("invalid_spec", f"{field}: not a valid regular expression: {exc}") from None
    except UnicodeEncodeError:
        raise bad_request("invalid_spec", "body_regex_bytes: only characters U+0000-U+00FF (one byte each) "
                                          "are allowed") from None
    except (ValueError, TypeError) as exc:
        text = str(exc)
        if "fromhex" in text or "hexadecimal" in text or "non-hexadecimal" in text:
            text = f"body_contains_hex: not a hex string ({exc})"
        elif "JSON path" in text:
            text = f"json_path: {exc}"
        raise bad_request("invalid_spec", text) from None
    if parsed.json_path is not None and "json_equals" not in spec:
        raise bad_request("invalid_spec", "json_path needs json_equals (the value to compare with)")
    if parsed.begin_ms is not None and parsed.end_ms is not None and parsed.end_ms < parsed.begin_ms:
        raise bad_request("invalid_spec", "end_ms is before begin_ms")
    return parsed.to_dict()


def _describe(spec: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in spec.items() if v not in (None, [], {}, "") and k not in ("limit",)]
    return ", ".join(parts)[:300] or "every record"


def start_search(user: Any, spec: dict[str, Any], brokers: list[str] | None = None) -> Job:
    """Create a ``spark.search`` job for ``spec`` (checked) and queue it."""
    spec = check_search_spec(spec)
    job = Job.objects.create(kind=SEARCH_KIND, target=_describe(spec), params={"spec": spec,
                                                                               "brokers": brokers or []},
                             user=_user(user))
    record(user, "spark.search", job.target, after={"job_id": job.pk, "spec": spec, "brokers": brokers or []})
    _queue(job)
    return job


def start_trace(user: Any, *, msg_id: str | None = None, key: str | None = None, begin_ms: int | None = None,
                end_ms: int | None = None, brokers: list[str] | None = None) -> Job:
    """Create a ``spark.trace`` job for a message id or key and queue it."""
    msg_id, key = (msg_id or "").strip() or None, (key or "").strip() or None
    if not msg_id and not key:
        raise bad_request("invalid_spec", "give msg_id or key")
    if begin_ms is not None and end_ms is not None and end_ms < begin_ms:
        raise bad_request("invalid_spec", "end_ms is before begin_ms")
    params = {"msg_id": msg_id, "key": key, "begin_ms": begin_ms, "end_ms": end_ms, "brokers": brokers or []}
    job = Job.objects.create(kind=TRACE_KIND, target=msg_id or f"key {key}", params=params, user=_user(user))
    record(user, "spark.trace", job.target, after={"job_id": job.pk, **params})
    _queue(job)
    return job


def _queue(job: Job) -> None:
    task, job_id = TASKS[job.kind], job.pk
    transaction.on_commit(lambda: _send(task, job_id))


def _send(task: str, job_id: int) -> None:
    try:
        task_id = send(task, {"job_id": job_id})
    except ConnectionError as exc:
        job_states.fail_unqueued(job_id, f"could not queue the job: {exc}")
        return
    job = Job.objects.filter(pk=job_id, status=Job.PENDING).only("result").first()
    if job is not None:  # once a worker has claimed the job, the row's result is the worker's to write
        Job.objects.filter(pk=job_id, status=Job.PENDING).update(result={**job.result, "task_id": task_id})


def cancel(user: Any, job: Job) -> Job:
    """Ask a search/trace job to stop; a 409 when it has already ended."""
    if job_states.request_cancel(job.pk) is None:
        job.refresh_from_db()
        raise ApiError(409, "job_ended", f"job {job.pk} is {job.status}; only a pending or running job can "
                                         "be cancelled")
    job.refresh_from_db()
    record(user, f"{job.kind}.cancel", job.target, after={"job_id": job.pk, "status": job.status})
    return job
