"""Reads of the Spark search/trace jobs: their state, paged results and export files.

Results are files a spark worker wrote under its results URI (``SPARK_RESULTS_URI``: a path on that worker's
host or a Hadoop filesystem URI, see :mod:`workers.spark_results`): ``results.jsonl`` / ``results.csv`` for a
search, ``trace.json`` for a trace. The console never opens them (it may run on another host, and has no
Hadoop client). It asks a spark worker through Celery (the ``workers.spark_results_*`` tasks on the ``spark``
queue, :func:`console.celery_client.call`) and waits at most ``SPARK_RESULTS_TIMEOUT_S``:

| what went wrong                                  | status | error                 |
|--------------------------------------------------|--------|-----------------------|
| no spark worker answered in time                 | 504    | spark_worker_timeout  |
| Redis (Celery's broker) cannot be reached        | 503    | celery_unavailable    |
| the read raised on the worker                    | 502    | spark_worker_error    |
| the worker has no such file (gone, URI changed)  | 404    | not_found             |

An export is streamed: :func:`export_stream` yields the file chunk by chunk (``SPARK_RESULTS_EXPORT_CHUNK_BYTES``
a request), so no process holds a whole export. Message bodies (``body_text`` / ``body_base64``) are removed for
callers who may not read them (viewers): the worker is asked for rows without them, and they are removed here too.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse

from console.celery_client import WorkerFailed, WorkerTimeout, call
from console.errors import ApiError, not_found
from console.jobs.models import Job
from console.jobs.names import (
    SEARCH_KIND,
    TASK_SPARK_RESULTS_EXPORT,
    TASK_SPARK_RESULTS_PAGE,
    TASK_SPARK_RESULTS_TRACE,
    TRACE_KIND,
)
from console.selectors.messages import iso_ms

BODY_FIELDS = ("body_text", "body_base64")
EXPORTS = {"jsonl": "application/x-ndjson", "csv": "text/csv"}


def get_spark_job(job_id: int | str, kind: str) -> Job:
    """The ``kind`` job ``job_id`` or a 404."""
    text = str(job_id)
    job = None
    if text.isdigit() and len(text) <= 18:
        job = Job.objects.select_related("user").filter(pk=int(text), kind=kind).first()
    if job is None:
        raise not_found(f"no {'search' if kind == SEARCH_KIND else 'trace'} job {job_id}")
    return job


def spark_job_json(job: Job) -> dict[str, Any]:
    """State, progress and counts of a search/trace job (no file paths)."""
    result = dict(job.result or {})
    result.pop("files", None)
    progress = result.pop("progress", None) or {}
    running = job.status in (Job.PENDING, Job.RUNNING, Job.CANCELLING)
    fraction = 1.0 if job.status == Job.DONE else float(progress.get("fraction", 0.0))
    out: dict[str, Any] = {
        "id": job.pk, "kind": job.kind, "target": job.target, "status": job.status, "running": running,
        "created": job.created.isoformat(), "finished": job.finished.isoformat() if job.finished else None,
        "user": job.user.get_username() if job.user else None, "params": job.params,
        "progress": {"tasks_done": job.progress, "tasks_total": job.total, "fraction": fraction,
                     "percent": int(fraction * 100), **{k: v for k, v in progress.items() if k != "fraction"}},
        "error": result.pop("error", None), "summary": result,
    }
    return out


def _require_done(job: Job) -> None:
    if job.status != Job.DONE:
        raise ApiError(409, "not_ready", f"job {job.pk} is {job.status}; results exist once it is done")


def ask_worker(task: str, job: Job, **kwargs: Any) -> dict[str, Any]:
    """A spark worker's answer to ``task`` about ``job`` (see the module docstring for the errors)."""
    timeout = float(settings.SPARK_RESULTS_TIMEOUT_S)
    try:
        answer = call(task, {"job_id": job.pk, **kwargs}, timeout)
    except WorkerTimeout:
        raise ApiError(504, "spark_worker_timeout",
                       f"no spark worker answered within {timeout:g} s: the results of job {job.pk} are read by a "
                       "Celery worker consuming the 'spark' queue (is one running, or busy with a long job?)") from None
    except WorkerFailed as exc:
        raise ApiError(502, "spark_worker_error", f"the spark worker could not read the results of job {job.pk}: "
                                                  f"{exc}") from None
    except ConnectionError as exc:
        raise ApiError(503, "celery_unavailable", f"cannot ask a spark worker for the results: {exc}") from None
    if not isinstance(answer, dict):
        raise ApiError(502, "spark_worker_error", f"unexpected answer from the spark worker: {type(answer).__name__}")
    if answer.get("missing"):
        raise not_found(f"the results of job {job.pk} are gone ({answer['missing']})")
    return answer


def strip_body(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in BODY_FIELDS}


def search_results(job: Job, offset: int, limit: int, with_body: bool) -> dict[str, Any]:
    """Rows ``offset .. offset+limit`` of a finished search, with ``count`` (rows kept) and ``matched``."""
    _require_done(job)
    answer = ask_worker(TASK_SPARK_RESULTS_PAGE, job, offset=offset, limit=limit, with_body=with_body)
    rows = [row if with_body else strip_body(row) for row in answer.get("rows", [])]
    summary = job.result or {}
    count = int(summary.get("rows", 0))
    return {"count": count, "matched": summary.get("matched", 0), "scanned": summary.get("scanned", 0),
            "truncated": bool(summary.get("truncated")), "offset": offset, "limit": limit,
            "next_offset": offset + len(rows) if offset + len(rows) < count else None, "results": rows}


def export_stream(job: Job, fmt: str) -> tuple[Iterator[bytes], str, int]:
    """A finished search's export (``jsonl`` or ``csv``): its chunks, content type and size in bytes. The first
    chunk is asked for here, so a missing file or an absent worker is an error before any byte is sent; a later
    chunk that fails ends the stream short of its announced size."""
    if fmt not in EXPORTS:
        raise not_found(f"no export format {fmt!r} (jsonl, csv)")
    _require_done(job)
    length = int(settings.SPARK_RESULTS_EXPORT_CHUNK_BYTES)
    first = ask_worker(TASK_SPARK_RESULTS_EXPORT, job, fmt=fmt, offset=0, length=length)
    size = int(first["size"])

    def chunks() -> Iterator[bytes]:
        answer, offset = first, 0
        while True:
            data = base64.b64decode(answer["data"])
            if data:
                yield data
            offset += len(data)
            if answer["eof"] or offset >= size:
                return
            if not data or int(answer["size"]) != size:
                raise RuntimeError(f"the export of job {job.pk} changed or stopped at byte {offset} of {size}")
            answer = ask_worker(TASK_SPARK_RESULTS_EXPORT, job, fmt=fmt, offset=offset, length=length)

    return chunks(), EXPORTS[fmt], size


def export_response(job: Job, fmt: str) -> StreamingHttpResponse:
    """The download of :func:`export_stream` (an attachment ``search-<id>.<fmt>`` with its length)."""
    chunks, content_type, size = export_stream(job, fmt)
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Length"] = str(size)
    response["Content-Disposition"] = f'attachment; filename="search-{job.pk}.{fmt}"'
    return response


def trace_results(job: Job) -> dict[str, Any]:
    """A finished trace: ``timeline`` (steps in time order, each with its broker), ``groups`` (per consumer group
    summary), ``ids`` and the message's ``records`` (coordinates, no bodies)."""
    _require_done(job)
    trace: dict[str, Any] = ask_worker(TASK_SPARK_RESULTS_TRACE, job)["trace"]
    return trace


def trace_lanes(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The timeline split per lane for the page: the producer side ("" group) first, then each group."""
    lanes: dict[str, list[dict[str, Any]]] = {}
    for step in trace.get("timeline", []):
        record = step.get("record") or {}
        lanes.setdefault(step.get("group") or "", []).append(
            {**step, "at": iso_ms(int(step.get("timestamp") or 0)), "offset_msg_id": record.get("offset_msg_id"),
             "new_msg_id": (step.get("extra") or {}).get("newMsgId")})
    order = sorted(lanes, key=lambda g: (g != "", g))
    groups = trace.get("groups", {})
    return [{"group": g, "steps": lanes[g], "summary": groups.get(g)} for g in order]


__all__ = ["SEARCH_KIND", "TRACE_KIND", "ask_worker", "export_response", "export_stream", "get_spark_job",
           "search_results", "spark_job_json", "trace_lanes", "trace_results"]
