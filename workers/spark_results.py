"""The Spark jobs' result files, on the spark worker: written by :mod:`workers.spark_jobs_service`, read for the
console by the ``workers.spark_results_*`` tasks (the console never opens them: it may run on another host).

Where: ``settings.SPARK_RESULTS_URI`` (``SPARK_RESULTS_DIR`` when unset), ``<uri>/<job id>/``: a local path or
``file://`` URI, or any Hadoop filesystem URI (through this process's SparkSession; see
:mod:`spark_jobs.results_store`). A search writes ``results.jsonl``, ``results.csv`` and ``results.index.json``
(the byte position of every :data:`INDEX_EVERY`-th row, so a page far down seeks instead of reading every row
before it); a trace writes ``trace.json``. Every writer streams (nothing holds a whole file).

The reads answer plain JSON for Celery: ``{"missing": name}`` when a file is not there (the console's 404), else
``{"rows": [...]}`` (bodies only when asked: the console asks for viewers without), ``{"trace": {...}}``, or
``{"size", "offset", "data" (base64), "eof"}`` for an export chunk. Which job may be read by whom is the
console's decision; this side reads what it is asked for under its own results URI, nothing else.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from console.jobs.results import strip_body
from spark_jobs.output import ResultWriter, seek_row
from spark_jobs.results_store import ResultMissing, ResultsStore, open_store

JSONL, CSV, INDEX, TRACE = "results.jsonl", "results.csv", "results.index.json", "trace.json"
EXPORTS = {"jsonl": JSONL, "csv": CSV}
INDEX_EVERY = 1000  # rows between two positions in results.index.json
MAX_PAGE_ROWS = 1000
MAX_CHUNK_BYTES = 4 << 20


def results_uri() -> str:
    """This worker's results URI (``SPARK_RESULTS_URI``, else ``SPARK_RESULTS_DIR``)."""
    return str(getattr(settings, "SPARK_RESULTS_URI", "") or settings.SPARK_RESULTS_DIR)


def _session() -> Any:
    from workers.spark_jobs_service import session  # the job service imports this module

    return session()


def store() -> ResultsStore:
    """The store of :func:`results_uri` (a Hadoop URI builds this process's SparkSession on first use)."""
    return open_store(results_uri(), _session)


def clear(job_id: int) -> bool:
    """Remove whatever a previous run of ``job_id`` left (a crashed run's partial files); True if there was any."""
    return store().delete(job_id)


# ---------------------------------------------------------------------------------------------- writes
@contextmanager
def search_writer(job_id: int) -> Iterator[ResultWriter]:
    """A :class:`ResultWriter` (``broker`` column first) on the job's JSON lines and CSV files; the row index
    is written once both are closed."""
    s = store()
    with ResultWriter(s.create(job_id, JSONL), s.create(job_id, CSV), extra_columns=("broker",),
                      index_every=INDEX_EVERY) as writer:
        yield writer
    with s.create(job_id, INDEX) as f:
        f.write(json.dumps(writer.row_index(), separators=(",", ":")).encode())


def write_trace(job_id: int, document: dict[str, Any]) -> str:
    """Stream ``document`` to the job's ``trace.json``; returns its location."""
    s = store()
    with io.TextIOWrapper(s.create(job_id, TRACE), encoding="utf-8") as f:
        json.dump(document, f, default=str, ensure_ascii=False)
    return s.location(job_id, TRACE)


def search_files(job_id: int) -> dict[str, str]:
    """Where a search's files are (recorded on the job for people; reads go by job id)."""
    s = store()
    return {"jsonl": s.location(job_id, JSONL), "csv": s.location(job_id, CSV)}


# ---------------------------------------------------------------------------------------------- reads
def search_page(job_id: int, offset: int, limit: int, with_body: bool) -> dict[str, Any]:
    """Rows ``offset .. offset+limit`` (limit at most :data:`MAX_PAGE_ROWS`) of a search's JSON lines."""
    offset, limit = max(0, int(offset)), max(0, min(int(limit), MAX_PAGE_ROWS))
    s = store()
    try:
        with s.open(job_id, INDEX) as f:
            index: dict[str, Any] | None = json.loads(f.read())
    except ResultMissing:
        index = None  # results written before the index existed: read from the start
    position, skip = seek_row(index, offset)
    rows: list[dict[str, Any]] = []
    try:
        with s.open(job_id, JSONL) as f:
            f.seek(position)
            for line in f:
                if skip:
                    skip -= 1
                    continue
                if len(rows) >= limit:
                    break
                row = json.loads(line)
                rows.append(row if with_body else strip_body(row))
    except ResultMissing:
        return {"missing": JSONL}
    return {"rows": rows}


def trace_document(job_id: int) -> dict[str, Any]:
    """A trace's ``trace.json`` as written."""
    try:
        with store().open(job_id, TRACE) as f:
            return {"trace": json.load(f)}
    except ResultMissing:
        return {"missing": TRACE}


def export_chunk(job_id: int, fmt: str, offset: int, length: int) -> dict[str, Any]:
    """Bytes ``offset .. offset+length`` (at most :data:`MAX_CHUNK_BYTES`) of a search's ``jsonl`` or ``csv``
    export, with the file's size; ``eof`` once the chunk reaches the end."""
    if fmt not in EXPORTS:
        raise ValueError(f"no export format {fmt!r} ({', '.join(EXPORTS)})")
    name, offset, length = EXPORTS[fmt], max(0, int(offset)), max(1, min(int(length), MAX_CHUNK_BYTES))
    s = store()
    try:
        size = s.size(job_id, name)
        with s.open(job_id, name) as f:
            f.seek(offset)
            data = f.read(length) if offset < size else b""
    except ResultMissing:
        return {"missing": name}
    return {"size": size, "offset": offset, "data": base64.b64encode(data).decode("ascii"),
            "eof": offset + len(data) >= size}
