"""Writing result rows: JSON lines (the console pages these) and CSV exports."""

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


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> str:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(jsonable(row), ensure_ascii=False, separators=(",", ":")) + "\n")
    return str(p)


def write_csv(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> str:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            r = jsonable(row)
            r["keys"] = " ".join(r.get("keys") or [])
            r["properties"] = json.dumps(r.get("properties") or {}, ensure_ascii=False)
            w.writerow(r)
    return str(p)


def read_jsonl(path: str | os.PathLike[str], offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows ``offset .. offset+limit`` of a JSON lines file (what a results page shows)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < offset:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(json.loads(line))
    return out
