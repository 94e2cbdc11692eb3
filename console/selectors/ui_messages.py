"""Reads shaped for the message and dead-letter pages: body renderings and dead-letter rows.

Everything returned here is plain text; templates escape it (never mark a body safe).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from broker_core.client import MessageExt
from console.selectors.messages import dead_letters, iso_ms

HEX_PREVIEW_BYTES = 64 * 1024  # hex of a larger body is cut (and the page says so)


def body_views(body: bytes) -> dict[str, Any]:
    """The renderings of a body: ``text`` (UTF-8 or None), ``json`` (pretty, when the text parses as JSON),
    ``base64`` and ``hex`` (for binary bodies), ``size`` and ``hex_truncated``."""
    out: dict[str, Any] = {"size": len(body), "text": None, "json": None, "base64": None, "hex": None,
                           "hex_truncated": False}
    try:
        out["text"] = body.decode("utf-8")
    except UnicodeDecodeError:
        out["base64"] = base64.b64encode(body).decode("ascii")
        out["hex"] = body[:HEX_PREVIEW_BYTES].hex(" ")
        out["hex_truncated"] = len(body) > HEX_PREVIEW_BYTES
        return out
    try:
        parsed = json.loads(out["text"])
    except ValueError:
        return out
    if isinstance(parsed, dict | list):  # a bare number or string is shown as text
        out["json"] = json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=False)
    return out


def dead_letter_row(msg: MessageExt) -> dict[str, Any]:
    """One dead letter for the table: ids, origin topic, reason, times, tags and keys."""
    return {"offset_msg_id": msg.offset_msg_id, "msg_id": msg.msg_id,
            "origin_topic": msg.properties.get("DLQ_ORIGIN_TOPIC", ""),
            "reason": msg.properties.get("DLQ_REASON", ""), "store_timestamp": iso_ms(msg.store_timestamp),
            "reconsume_times": msg.reconsume_times, "tags": msg.tags, "keys": msg.keys, "body_size": len(msg.body)}


def dead_letter_rows(group: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The group's dead letters as table rows (oldest first) and whether the list was cut at ``limit``."""
    found, truncated = dead_letters(group, limit)
    return [dead_letter_row(m) for m in found], truncated
