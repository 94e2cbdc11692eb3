"""Writing result rows: JSON lines (the console pages these) and CSV exports.

CSV cells are escaped against formula injection: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return gets a leading ``'``, so a spreadsheet shows it as text instead of running it (message keys, tags
and bodies are producer-controlled). Numbers are written as they are.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

CSV_COLUMNS = ["topic", "queue_id", "queue_offset", "phy_offset", "store_size", "msg_id", "offset_msg_id", "keys",
               "tags", "born_timestamp", "store_timestamp", "reconsume_times", "sys_flag", "segment", "pos",
               "properties", "body_text", "body_base64"]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` made safe for a spreadsheet (see the module docstring)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its body as ``body_base64`` (and ``body_text`` when it is UTF-8)."""
    out = {k: v for k, v in row.items() if k != "body"}
    body = row.get("body")
    if body is not None:
        out["body_base64"] = base64.b64encode(body).decode()
        try:
            out["body_text"] = body.decode("utf-8")
        except UnicodeDecodeError:
            out["body_text"] = None
    return out


class ResultWriter:
    """Streams rows to a JSON lines file and/or a CSV file. Each target is a path (opened here), a writable binary
    stream (e.g. from :mod:`spark_jobs.results_store`; closed with the writer) or None. ``extra_columns`` lead
    the CSV (e.g. ``broker``); their values are given per row to :meth:`write`. Use as a context manager.

    ``index_every`` > 0 keeps :attr:`positions`: the byte offset in the JSON lines file of rows 0, n, 2n, ...
    (see :meth:`row_index`), so a reader can seek near row ``k`` instead of reading every row before it."""

    def __init__(self, jsonl_path: str | os.PathLike[str] | BinaryIO | None = None,
                 csv_path: str | os.PathLike[str] | BinaryIO | None = None,
                 extra_columns: tuple[str, ...] = (), index_every: int = 0) -> None:
        self._files = contextlib.ExitStack()  # closes last-opened first: the CSV's text layer before its stream
        self._jsonl: Any = self._open(jsonl_path) if jsonl_path is not None else None
        self._csv = None
        if csv_path is not None:
            text = self._files.enter_context(io.TextIOWrapper(self._open(csv_path), encoding="utf-8", newline=""))
            self._csv = csv.DictWriter(text, [*extra_columns, *CSV_COLUMNS], extrasaction="ignore")
            self._csv.writeheader()
        self.rows, self.jsonl_bytes, self.index_every = 0, 0, index_every
        self.positions: list[int] = []

    def _open(self, target: str | os.PathLike[str] | BinaryIO) -> Any:
        if isinstance(target, str | os.PathLike):
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            target = open(target, "wb")
        return self._files.enter_context(target)

    def write(self, row: dict[str, Any], **extra: Any) -> None:
        r = {**extra, **jsonable(row)}
        if self._jsonl is not None:
            if self.index_every and self.rows % self.index_every == 0:
                self.positions.append(self.jsonl_bytes)
            line = (json.dumps(r, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")
            self._jsonl.write(line)
            self.jsonl_bytes += len(line)
        if self._csv is not None:
            cells = {**r, "keys": " ".join(r.get("keys") or []),
                     "properties": json.dumps(r.get("properties") or {}, ensure_ascii=False)}
            self._csv.writerow({k: csv_cell(v) for k, v in cells.items()})
        self.rows += 1

    def close(self) -> None:
        """Close every file, each even when closing another failed (that error is raised)."""
        self._files.close()

    def row_index(self) -> dict[str, Any]:
        """``{"every", "rows", "positions"}``: what :func:`seek_row` reads back."""
        return {"every": self.index_every, "rows": self.rows, "positions": self.positions}

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def seek_row(index: dict[str, Any] | None, row: int) -> tuple[int, int]:
    """``(byte position, rows to skip from there)`` to reach ``row`` of a JSON lines file with ``index`` (from
    :meth:`ResultWriter.row_index`; None: from the start)."""
    every = int((index or {}).get("every") or 0)
    positions = (index or {}).get("positions") or []
    if every <= 0 or not positions:
        return 0, row
    slot = min(row // every, len(positions) - 1)
    return int(positions[slot]), row - slot * every


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> str:
    with ResultWriter(jsonl_path=path) as w:
        for row in rows:
            w.write(row)
    return str(path)


def write_csv(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> str:
    with ResultWriter(csv_path=path) as w:
        for row in rows:
            w.write(row)
    return str(path)


def read_jsonl(path: str | os.PathLike[str], offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows ``offset .. offset+limit`` of a JSON lines file (what a results page shows)."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < offset:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(json.loads(line))
    return out
