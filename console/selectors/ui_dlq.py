"""Dead-letter exports for the pages: JSON lines and CSV, of a selection or of every dead letter of a group.

Viewers get metadata only; operators and admins also get the body (``body`` text for UTF-8, else
``body_base64``), as in the API.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from broker_core.client import MessageExt
from broker_core.codec.names import PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_DLQ_REASON
from console.selectors.messages import body_json, dead_letters, iso_ms

EXPORT_LIMIT = 10_000  # dead letters per "export all" (the response says when it was cut)
CSV_COLUMNS = ("offset_msg_id", "msg_id", "origin_topic", "reason", "store_timestamp", "reconsume_times", "tags",
               "keys", "body_size", "body", "body_base64")


def export_rows(group: str, ids: list[str] | None, with_body: bool) -> tuple[list[dict[str, Any]], bool]:
    """The group's dead letters (every one up to :data:`EXPORT_LIMIT`, or those with an offset id in ``ids``)
    as flat dicts, oldest first, and whether "every one" was cut at the limit."""
    found, truncated = dead_letters(group, EXPORT_LIMIT)
    if ids is not None:
        wanted = {i.upper() for i in ids}
        found, truncated = [m for m in found if m.offset_msg_id.upper() in wanted], False
    return [_row(m, with_body) for m in found], truncated


def _row(msg: MessageExt, with_body: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "offset_msg_id": msg.offset_msg_id, "msg_id": msg.msg_id,
        "origin_topic": msg.properties.get(PROPERTY_DLQ_ORIGIN_TOPIC, ""),
        "reason": msg.properties.get(PROPERTY_DLQ_REASON, ""),
        "store_timestamp": iso_ms(msg.store_timestamp), "reconsume_times": msg.reconsume_times,
        "tags": msg.tags or "", "keys": list(msg.keys or []), "body_size": len(msg.body),
        "properties": dict(msg.properties),
    }
    if with_body:
        body = body_json(msg.body)
        row["body"] = body.get("text")
        row["body_base64"] = body.get("base64")
    return row


def as_json_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """One JSON object per line."""
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


def as_csv(rows: Iterable[dict[str, Any]], with_body: bool) -> str:
    """CSV with a header row; keys joined by spaces. Cells that a spreadsheet would run as a formula are
    prefixed with ``'``."""
    columns = [c for c in CSV_COLUMNS if with_body or c not in ("body", "body_base64")]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            text = " ".join(value) if isinstance(value, list) else ("" if value is None else str(value))
            if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
                text = "'" + text
            cells.append(text)
        writer.writerow(cells)
    return out.getvalue()
