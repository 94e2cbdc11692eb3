"""Producing messages and resending dead letters, audited (ids and counts only, never bodies)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker_core.client import Message
from broker_core.protocol.validation import group_error, topic_error
from console import broker_client
from console.errors import bad_request
from console.jobs.resend_records import resend
from console.services.audit import audited

MAX_BODY_BYTES = 4 * 1024 * 1024  # the SDK's and broker's default maxMessageSize


@dataclass
class OutgoingMessage:
    """One message to produce, its body already decoded to bytes."""

    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0


BATCH_MAX_BYTES = 4 * 1024 * 1024  # larger requests go message by message (the broker's frame limit is 16 MiB)


def produce(user: Any, topic: str, messages: list[OutgoingMessage], *, reproduced_from: str | None = None
            ) -> list[dict[str, Any]]:
    """Send each message to ``topic`` in order; one result per message. ``reproduced_from`` (the offset id of
    the message the send form was pre-filled from) makes the audit event ``message.reproduce``, naming it."""
    err = topic_error(topic)
    if err:
        raise bad_request("invalid_topic", err)
    producer = broker_client.producer()
    outgoing = [Message(topic, m.body, tags=m.tags or None, keys=m.keys or None, properties=m.properties or None,
                        delay_level=m.delay_level) for m in messages]
    action, before = ("message.reproduce", {"from": reproduced_from}) if reproduced_from else ("message.produce", None)
    with audited(user, action, topic, before) as entry:
        if len(outgoing) > 1 and not any(m.delay_level for m in outgoing) and \
                sum(len(m.body) for m in outgoing) <= BATCH_MAX_BYTES:
            # one batch request: the messages land together, in order, in one queue
            sent = producer.send_batch(outgoing)
            broker = sent.message_queue.broker_name if sent.message_queue else None
            results = [{"msg_id": msg_id, "offset_msg_id": offset_id, "queue_id": sent.queue_id,
                        "queue_offset": sent.queue_offset + i, "broker_name": broker}
                       for i, (msg_id, offset_id) in enumerate(zip(sent.msg_id.split(","),
                                                                   sent.offset_msg_id.split(","), strict=True))]
        else:
            results = []
            for m in outgoing:
                sent = producer.send(m)
                results.append({"msg_id": sent.msg_id, "offset_msg_id": sent.offset_msg_id,
                                "queue_id": sent.queue_id, "queue_offset": sent.queue_offset,
                                "broker_name": sent.message_queue.broker_name if sent.message_queue else None})
        entry.after = {"count": len(results), "msg_ids": [r["msg_id"] for r in results]}
    return results


def check_resend(group: str, topic: str | None) -> None:
    """A 400 unless ``group`` (and ``topic``, when given) are valid names."""
    err = group_error(group) or (topic_error(topic) if topic else None)
    if err:
        raise bad_request("invalid", err)


def resend_dead_letters(user: Any, group: str, offset_msg_ids: list[str], topic: str | None,
                        force: bool = False) -> list[dict[str, Any]]:
    """Re-produce dead letters of ``group`` to their original topic (or ``topic``); one result per id. Each dead
    letter is resent at most once: one resent before answers with its earlier copy (``already_resent``) unless
    ``force`` (see :mod:`console.jobs.resend_records`)."""
    check_resend(group, topic)
    with audited(user, "dlq.resend", group, {"offset_msg_ids": offset_msg_ids, "topic": topic,
                                             "force": force}) as entry:
        results = resend(group, offset_msg_ids, topic, force=force)
        entry.after = {"results": results}
        entry.ok = all(r["ok"] for r in results)
    return results
