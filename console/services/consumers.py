"""Receive/ack over HTTP through the SDK's SimpleConsumer.

The REST receipt handle is ``<broker name>!<broker receipt handle>``: the broker's handle
(``topic|queue|offset|serial|deadline``) does not say which broker issued it, and an ack must go back there.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from broker_core.client import ClientError, MessageExt
from broker_core.protocol.validation import group_error, topic_error
from console import broker_client
from console.errors import bad_request
from console.selectors.messages import message_json
from console.services.audit import audited

HANDLE_SEPARATOR = "!"


def rest_handle(msg: MessageExt) -> str:
    """The handle the API gives out for a received message."""
    return f"{msg.broker_name}{HANDLE_SEPARATOR}{msg.receipt_handle}"


def _check(group: str, topic: str) -> None:
    err = group_error(group) or topic_error(topic)
    if err:
        raise bad_request("invalid", err)


def receive(group: str, topic: str, max_messages: int, invisible_seconds: float,
            wait_seconds: float) -> list[dict[str, Any]]:
    """Up to ``max_messages`` messages of ``topic`` for ``group``, each with its ``receipt_handle``."""
    _check(group, topic)
    consumer = broker_client.consumer(group)
    consumer.subscribe(topic)
    msgs = consumer.receive(max_num=max_messages, invisible_duration=invisible_seconds, wait=wait_seconds,
                            topic=topic)
    return [{**message_json(m, with_body=True), "receipt_handle": rest_handle(m)} for m in msgs]


def _ack_one(group: str, topic: str, handle: str) -> dict[str, Any]:
    broker, sep, inner = handle.rpartition(HANDLE_SEPARATOR)
    if not sep or not broker or not inner:
        return {"receipt_handle": handle, "ok": False, "error": "malformed receipt handle"}
    msg = SimpleNamespace(topic=topic, broker_name=broker, receipt_handle=inner)
    try:
        broker_client.consumer(group).ack(cast(MessageExt, msg))
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
    return results
