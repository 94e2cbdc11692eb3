"""Consuming one stored message directly with one online client (RocketMQ's CONSUME_MESSAGE_DIRECTLY, 309: the
message's store broker sends the record to the client, whose listener runs on it once; nothing is acknowledged,
no offset moves, nothing is re-produced). Audited as ``message.consume_directly`` with the message, group, client
and the client's answer (never the body)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from broker_core.client import ClientError
from broker_core.codec import CodecError
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.protocol.validation import group_error, topic_error
from console import broker_client
from console.errors import bad_request
from console.selectors.clients import client_error
from console.services.audit import audited


def consume_directly(user: Any, offset_msg_id: str, group: str, client_id: str,
                     topic: str | None = None) -> dict[str, Any]:
    """Ask ``client_id`` of ``group`` to consume the message at ``offset_msg_id``: ``consume_result``
    (CR_SUCCESS, CR_LATER, CR_RETURN_NULL, CR_THROW_EXCEPTION...), ``remark`` (the exception text), the listener's
    ``spent_ms``, ``order``/``auto_commit`` and when it was asked (``at``). 400 for bad names or ids; 409, 504 or
    502 when the broker could not reach the client (the failure is audited too)."""
    err = group_error(group) or (topic_error(topic) if topic else None) or ("client id is required"
                                                                            if not client_id.strip() else None)
    if err:
        raise bad_request("invalid", err)
    try:
        decode_offset_msg_id(offset_msg_id)
    except CodecError as exc:
        raise bad_request("invalid_msg_id", str(exc)) from exc
    at = dt.datetime.now(tz=dt.UTC)
    before = {"offset_msg_id": offset_msg_id, "group": group, "client_id": client_id, "topic": topic}
    try:
        with audited(user, "message.consume_directly", offset_msg_id, before) as entry:
            result = broker_client.admin().consume_message_directly(group, client_id, offset_msg_id, topic)
            out = {"consume_result": result.consume_result, "remark": result.remark,
                   "spent_ms": result.spent_time_ms, "order": result.order, "auto_commit": result.auto_commit,
                   "group": group, "client_id": client_id, "offset_msg_id": offset_msg_id,
                   "at": at.isoformat(timespec="milliseconds")}
            entry.after = {k: out[k] for k in ("consume_result", "remark", "spent_ms")}
    except ClientError as exc:  # recorded as failed by audited(); the console's answer says why
        raise client_error(exc) from exc
    return out
