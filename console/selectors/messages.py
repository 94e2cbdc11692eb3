"""Message reads: lookups by offset id, unique id and key, and the JSON shape every endpoint uses."""

from __future__ import annotations

import base64
import datetime as dt
import re
from typing import Any

from broker_core.client import MessageExt
from broker_core.codec.errors import CodecError
from broker_core.codec.message_id import decode_offset_msg_id
from console import broker_client
from console.errors import bad_request, not_found

MESSAGE_ID = re.compile(r"^[0-9A-Fa-f]{32}$")
# Properties the JSON already shows as fields.
SHOWN_PROPERTIES = {"TAGS", "KEYS", "UNIQ_KEY"}


def iso_ms(ms: int) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC, None for 0 (never)."""
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def body_json(body: bytes) -> dict[str, str]:
    """``{"text": ...}`` for UTF-8 bodies, else ``{"base64": ...}``."""
    try:
        return {"text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}


def message_json(msg: MessageExt, with_body: bool) -> dict[str, Any]:
    """The API shape of one message; ``with_body=False`` (viewers) leaves the body out."""
    out: dict[str, Any] = {
        "msg_id": msg.msg_id, "offset_msg_id": msg.offset_msg_id, "topic": msg.topic,
        "broker_name": msg.broker_name, "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
        "tags": msg.tags, "keys": msg.keys,
        "properties": {k: v for k, v in msg.properties.items() if k not in SHOWN_PROPERTIES},
        "born_timestamp": iso_ms(msg.born_timestamp), "store_timestamp": iso_ms(msg.store_timestamp),
        "born_host": msg.born_host, "store_host": msg.store_host, "reconsume_times": msg.reconsume_times,
        "body_size": len(msg.body),
    }
    if with_body:
        out["body"] = body_json(msg.body)
    return out


def check_message_id(msg_id: str) -> None:
    """Raise a 400 unless ``msg_id`` is 32 hex characters (both id kinds are)."""
    if not MESSAGE_ID.match(msg_id):
        raise bad_request("invalid_message_id", f"a message id is 32 hex characters, got {msg_id!r}")


def _broker_addrs() -> set[str]:
    info = broker_client.admin().cluster_info()
    return {addr for data in info.get("brokerAddrTable", {}).values() for addr in data.get("brokerAddrs", {}).values()}


def message_by_offset_id(offset_msg_id: str) -> MessageExt:
    """The message an offset id points at. Only asks brokers the name server knows (an id is not a way to
    make the console connect anywhere); 404 when no known broker has it."""
    check_message_id(offset_msg_id)
    try:
        ip, port, _ = decode_offset_msg_id(offset_msg_id)
    except CodecError as exc:
        raise bad_request("invalid_message_id", str(exc)) from None
    if f"{ip}:{port}" not in _broker_addrs():
        raise not_found(f"no known broker at {ip}:{port}; is {offset_msg_id} an offset message id? "
                        "For a unique message id pass ?topic=")
    return broker_client.admin().view_message(offset_msg_id.upper())


def message_by_unique_id(topic: str, msg_id: str) -> MessageExt:
    """The message of ``topic`` with unique id ``msg_id`` (through the broker's index); 404 when none."""
    check_message_id(msg_id)
    found, _ = broker_client.admin().query_message(topic, msg_id.upper(), max_num=1)
    if not found:
        raise not_found(f"no message {msg_id} in topic {topic}")
    return found[0]


def messages_by_key(topic: str, key: str, limit: int, begin_ms: int = 0,
                    end_ms: int = (1 << 63) - 1) -> tuple[list[MessageExt], bool]:
    """Messages of ``topic`` with ``key``, newest first, and whether more than ``limit`` exist."""
    return broker_client.admin().query_message(topic, key, max_num=limit, begin_ms=begin_ms, end_ms=end_ms)


def dead_letters(group: str, limit: int) -> tuple[list[MessageExt], bool]:
    """Dead letters of ``group``, oldest first, and whether the list was cut at ``limit``."""
    found = broker_client.admin().dead_letters(group, max_num=limit + 1)
    return found[:limit], len(found) > limit
