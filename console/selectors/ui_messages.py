"""Reads shaped for the message and dead-letter pages: body renderings and dead-letter rows.

Everything returned here is plain text; templates escape it (never mark a body safe).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from broker_core.client import MessageExt
from broker_core.codec.names import PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_DLQ_REASON, PROPERTY_RETRY_TOPIC
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
            "origin_topic": msg.properties.get(PROPERTY_DLQ_ORIGIN_TOPIC, ""),
            "reason": msg.properties.get(PROPERTY_DLQ_REASON, ""), "store_timestamp": iso_ms(msg.store_timestamp),
            "reconsume_times": msg.reconsume_times, "tags": msg.tags, "keys": msg.keys, "body_size": len(msg.body)}


def dead_letter_rows(group: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The group's dead letters as table rows (oldest first) and whether the list was cut at ``limit``."""
    found, truncated = dead_letters(group, limit)
    return [dead_letter_row(m) for m in found], truncated


# Properties the broker or SDK set themselves (ids, routing, delay, retry, transaction bookkeeping) or that the
# send form has fields for; a re-produced message gets fresh ones, so they are not copied into the form.
SYSTEM_PROPERTIES = frozenset({
    "TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "REAL_TOPIC", "REAL_QID", PROPERTY_RETRY_TOPIC, "ORIGIN_MESSAGE_ID",
    "TRAN_MSG", "PGROUP", "MAX_RECONSUME_TIMES", "TRACE_ON", "MSG_REGION", "CONSUME_START_TIME", "MIN_OFFSET",
    "MAX_OFFSET", "CLUSTER", "TIMER_DELIVER_MS",
})


def reproduce_initial(msg: MessageExt) -> dict[str, Any]:
    """The send form's initial values to re-produce ``msg``: its body (text, or base64 when binary), tags, keys
    and user properties (``name=value`` lines), and the offset id it came from (for the audit log)."""
    try:
        body, encoding = msg.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(msg.body).decode("ascii"), "base64"
    props = {k: v for k, v in msg.properties.items() if k not in SYSTEM_PROPERTIES and not k.startswith("DLQ_")}
    return {"body": body, "body_encoding": encoding, "tags": msg.tags or "", "keys": " ".join(msg.keys),
            "properties": "\n".join(f"{k}={v}" for k, v in sorted(props.items())),
            "reproduced_from": msg.offset_msg_id}


def reproduce_topic(msg: MessageExt) -> str:
    """Where a re-produce of ``msg`` goes: a dead letter's or retry message's original topic, else its own."""
    return msg.properties.get(PROPERTY_DLQ_ORIGIN_TOPIC) or msg.properties.get(PROPERTY_RETRY_TOPIC) or msg.topic
