"""Receive/ack/nack over HTTP through the SDK's SimpleConsumer.

The REST receipt handle is ``<broker name>!<broker receipt handle>``: the broker's handle
(RocketMQ 5's POP ``extraInfo``) is kept whole after the broker name, which says where an ack must go.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from broker_core.client import ClientError, MessageExt
from broker_core.protocol.validation import group_error, topic_error
from console import broker_client
from console.errors import bad_request
from console.selectors.broker_cache import invalidate_all
from console.selectors.messages import message_json
from console.services.audit import RECORDED_ERRORS, audited, record

HANDLE_SEPARATOR = "!"
# The smallest invisible time the broker accepts for CHANGE_MESSAGE_INVISIBLETIME (1000 ms): a nacked message
# is received again about a second later.
NACK_INVISIBLE_S = 1.0


def rest_handle(msg: MessageExt) -> str:
    """The handle the API gives out for a received message."""
    return f"{msg.broker_name}{HANDLE_SEPARATOR}{msg.receipt_handle}"


def _check(group: str, topic: str) -> None:
    err = group_error(group) or topic_error(topic)
    if err:
        raise bad_request("invalid", err)


def receive(group: str, topic: str, max_messages: int, invisible_seconds: float,
            wait_seconds: float, user: Any = None, expression: str = "*",
            expression_type: str = "TAG") -> list[dict[str, Any]]:
    """Up to ``max_messages`` messages of ``topic`` for ``group`` that ``expression`` selects (tags, or SQL92 over
    properties, which the broker filters when it has ``enablePropertyFilter``), each with its ``receipt_handle``.

    Audited as ``message.receive`` when it hands out messages (their ids and positions, never bodies or handles)
    or fails; an empty poll changes nothing and is not recorded."""
    _check(group, topic)
    target = f"{group}/{topic}"
    try:
        consumer = broker_client.consumer(group)
        consumer.subscribe(topic, expression, expression_type)
        msgs = consumer.receive(max_num=max_messages, invisible_duration=invisible_seconds, wait=wait_seconds,
                                topic=topic)
    except RECORDED_ERRORS as exc:
        record(user, "message.receive", target, after={"error": str(exc)}, ok=False)
        raise
    out = [{**message_json(m, with_body=True), "receipt_handle": rest_handle(m)} for m in msgs]
    if out:
        keys = ("msg_id", "offset_msg_id", "broker_name", "queue_id", "queue_offset")
        record(user, "message.receive", target,
               after={"count": len(out), "messages": [{k: m.get(k) for k in keys} for m in out]})
    return out


def _handle_message(topic: str, handle: str) -> MessageExt | None:
    """A stand-in message carrying ``handle``'s broker and broker handle, or None for a malformed handle."""
    broker, sep, inner = handle.rpartition(HANDLE_SEPARATOR)
    if not sep or not broker or not inner:
        return None
    return cast(MessageExt, SimpleNamespace(topic=topic, broker_name=broker, receipt_handle=inner))


def _ack_one(group: str, topic: str, handle: str) -> dict[str, Any]:
    msg = _handle_message(topic, handle)
    if msg is None:
        return {"receipt_handle": handle, "ok": False, "error": "malformed receipt handle"}
    try:
        broker_client.consumer(group).ack(msg)
    except ClientError as exc:
        return {"receipt_handle": handle, "ok": False, "error": str(exc)}
    return {"receipt_handle": handle, "ok": True, "error": None}


def ack(user: Any, group: str, topic: str, handles: list[str]) -> list[dict[str, Any]]:
    """Ack each handle; one result per handle, in order (a stale or unknown handle is a failed result)."""
    _check(group, topic)
    with audited(user, "message.ack", f"{group}/{topic}") as entry:
        results = [_ack_one(group, topic, h) for h in handles]
        entry.after = {"results": results}
        entry.ok = all(r["ok"] for r in results)
    invalidate_all()  # a group this console acked for is listed (console_audit) at once
    return results


def _nack_one(group: str, topic: str, handle: str) -> dict[str, Any]:
    msg = _handle_message(topic, handle)
    if msg is None:
        return {"receipt_handle": handle, "ok": False, "error": "malformed receipt handle", "new_receipt_handle": None}
    try:
        broker_client.consumer(group).change_invisible_duration(msg, NACK_INVISIBLE_S)
    except ClientError as exc:
        return {"receipt_handle": handle, "ok": False, "error": str(exc), "new_receipt_handle": None}
    return {"receipt_handle": handle, "ok": True, "error": None, "new_receipt_handle": rest_handle(msg)}


def nack(user: Any, group: str, topic: str, handles: list[str]) -> list[dict[str, Any]]:
    """Make each handle's message visible again (CHANGE_MESSAGE_INVISIBLETIME with the broker's minimum, 1 s:
    it is redelivered, ``reconsume_times`` raised, about a second later). One result per handle, in order;
    ``new_receipt_handle`` replaces the old one, which no longer works, should the caller still want to ack."""
    _check(group, topic)
    with audited(user, "message.nack", f"{group}/{topic}") as entry:
        results = [_nack_one(group, topic, h) for h in handles]
        entry.after = {"results": [{k: r[k] for k in ("receipt_handle", "ok", "error")} for r in results]}
        entry.ok = all(r["ok"] for r in results)
    invalidate_all()
    return results
