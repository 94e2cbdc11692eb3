"""Reads of the Spark search/trace jobs: their state, paged results and export files.

Results are files the worker wrote under ``settings.SPARK_RESULTS_DIR/<job id>/`` (the console and the Spark
worker share that directory): ``results.jsonl`` / ``results.csv`` for a search, ``trace.json`` for a trace.
Message bodies (``body_text`` / ``body_base64``) are removed for callers who may not read them (viewers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings

from console.errors import ApiError, not_found
from console.jobs.models import Job
from console.jobs.names import SEARCH_KIND, TRACE_KIND
from console.selectors.messages import iso_ms

BODY_FIELDS = ("body_text", "body_base64")
EXPORTS = {"jsonl": ("results.jsonl", "application/x-ndjson"), "csv": ("results.csv", "text/csv")}


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


def _file(job: Job, name: str) -> Path:
    if job.status != Job.DONE:
        raise ApiError(409, "not_ready", f"job {job.pk} is {job.status}; results exist once it is done")
    path = Path(settings.SPARK_RESULTS_DIR) / str(job.pk) / name
    if not path.is_file():
        raise not_found(f"the results of job {job.pk} are gone ({name})")
    return path


def strip_body(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in BODY_FIELDS}


def search_results(job: Job, offset: int, limit: int, with_body: bool) -> dict[str, Any]:
    """Rows ``offset .. offset+limit`` of a finished search, with ``count`` (rows kept) and ``matched``."""
    path = _file(job, "results.jsonl")
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < offset:
                continue
            if len(rows) >= limit:
                break
            row = json.loads(line)
            rows.append(row if with_body else strip_body(row))
    summary = job.result or {}
    count = int(summary.get("rows", 0))
    return {"count": count, "matched": summary.get("matched", 0), "scanned": summary.get("scanned", 0),
            "truncated": bool(summary.get("truncated")), "offset": offset, "limit": limit,
            "next_offset": offset + len(rows) if offset + len(rows) < count else None, "results": rows}


def export_file(job: Job, fmt: str) -> tuple[Path, str]:
    """The path and content type of a finished search's export (``jsonl`` or ``csv``)."""
    if fmt not in EXPORTS:
        raise not_found(f"no export format {fmt!r} (jsonl, csv)")
    name, content_type = EXPORTS[fmt]
    return _file(job, name), content_type


def trace_results(job: Job) -> dict[str, Any]:
    """A finished trace: ``timeline`` (steps in time order, each with its broker), ``groups`` (per consumer group
    summary), ``ids`` and the message's ``records`` (coordinates, no bodies)."""
    path = _file(job, "trace.json")
    return json.loads(path.read_text(encoding="utf-8"))


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


__all__ = ["SEARCH_KIND", "TRACE_KIND", "export_file", "get_spark_job", "search_results", "spark_job_json",
           "trace_lanes", "trace_results"]
