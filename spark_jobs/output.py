"""Writing result rows: JSON lines (the console pages these) and CSV exports.

CSV cells are escaped against formula injection: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return gets a leading ``'``, so a spreadsheet shows it as text instead of running it (message keys, tags
and bodies are producer-controlled). Numbers are written as they are.
"""

from __future__ import annotations

import base64
import csv
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
    """Streams rows to a JSON lines file and/or a CSV file (either path may be None). ``extra_columns`` lead
    the CSV (e.g. ``broker``); their values are given per row to :meth:`write`. Use as a context manager."""

    def __init__(self, jsonl_path: str | os.PathLike[str] | None = None, csv_path: str | os.PathLike[str] | None = None,
                 extra_columns: tuple[str, ...] = ()) -> None:
        self._files: list[Any] = []
        self._jsonl = self._open(jsonl_path) if jsonl_path else None
        self._csv = None
        if csv_path:
            self._csv = csv.DictWriter(self._open(csv_path, newline=""), [*extra_columns, *CSV_COLUMNS],
                                       extrasaction="ignore")
            self._csv.writeheader()

    def _open(self, path: str | os.PathLike[str], newline: str | None = None) -> Any:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "w", encoding="utf-8", newline=newline)
        self._files.append(f)
        return f

    def write(self, row: dict[str, Any], **extra: Any) -> None:
        r = {**extra, **jsonable(row)}
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(r, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")
        if self._csv is not None:
            cells = {**r, "keys": " ".join(r.get("keys") or []),
                     "properties": json.dumps(r.get("properties") or {}, ensure_ascii=False)}
            self._csv.writerow({k: csv_cell(v) for k, v in cells.items()})

    def close(self) -> None:
        for f in self._files:
            f.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
