"""Idempotent resending of dead letters: every resend goes through a :class:`ResendRecord`.

For each dead letter of a chunk, in order:

1. Its newest record decides. ``sent`` by someone else: the earlier copy is the answer (``already_resent``),
   unless ``force``, which starts the next generation. ``sent`` by this same job (an earlier run of it): that
   copy is this job's result, forced or not.
2. An ``intent`` (a resend whose outcome nobody recorded) is taken over when it is this job's own (its earlier
   run died: the job's lease says that run is gone) or when its ``claimed_at`` is older than the lease (a dead
   web request or job). It is settled on the broker (:func:`console.jobs.resend_lookup.find_copy`): a copy
   found becomes the record's result (``recovered``); none means it is sent now under the same record. A live
   intent of someone else is reported as in progress and left alone.
3. A dead letter with no record is read first (one VIEW_MESSAGE_BY_ID, only on brokers the name server knows):
   not a dead letter of ``group`` is a failure with no record; otherwise an intent is written (with the copy's
   topic, origin id and keys, what step 2 needs), then the chunk's intents go to the broker in one
   RESEND_DEAD_LETTERS, then each answer is recorded: ``ok`` makes the record ``sent``; anything else (a refusal,
   a timeout, a lost connection) leaves it an intent, so the next attempt looks before it sends again.

Crash behaviour (callers run in autocommit, outside ``transaction.atomic``, as views and the task do): the
intent is committed before the send and the result after it, so a process killed between
the two leaves an intent whose copy the next attempt finds on the broker: each dead letter is resent once.
Races: a unique (group, dead letter, generation) and one intent per dead letter make two concurrent attempts
write at most one intent; the loser re-reads the record.

Result shape (one per requested id, in order; the earlier API fields first)::

    {"offset_msg_id", "ok", "topic", "new_msg_id", "new_offset_msg_id", "error",
     "already_resent", "recovered", "generation"}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from broker_core.client import ClientError, MessageExt
from broker_core.codec.errors import CodecError
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.codec.names import PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_RETRY_TOPIC
from broker_core.protocol.validation import dlq_topic
from console import broker_client
from console.jobs.models import ResendRecord
from console.jobs.resend_lookup import find_copy
from console.jobs.selectors import resend_lease as lease

log = logging.getLogger(__name__)

BROKER_ERRORS = (ClientError, ConnectionError, TimeoutError)


def chunk_size() -> int:
    return max(1, int(settings.DLQ_RESEND_CHUNK))


def outcome(oid: str, *, ok: bool, topic: str | None = None, new_msg_id: str | None = None,
            new_offset_msg_id: str | None = None, error: str | None = None, already_resent: bool = False,
            recovered: bool = False, generation: int | None = None) -> dict[str, Any]:
    return {"offset_msg_id": oid, "ok": ok, "topic": topic, "new_msg_id": new_msg_id,
            "new_offset_msg_id": new_offset_msg_id, "error": error, "already_resent": already_resent,
            "recovered": recovered, "generation": generation}


def _sent(rec: ResendRecord, job_id: int | None, fresh: bool = False) -> dict[str, Any]:
    """The outcome of a ``sent`` record: ``fresh`` when this attempt made (or adopted) it; otherwise it was
    ``already_resent`` unless an earlier run of the same job made it."""
    mine = fresh or (job_id is not None and rec.job_id == job_id)
    return outcome(rec.offset_msg_id, ok=True, topic=rec.topic, new_msg_id=rec.new_msg_id,
                   new_offset_msg_id=rec.new_offset_msg_id or None, already_resent=not mine,
                   recovered=rec.recovered, generation=rec.generation)


def _newest(group: str, oid: str) -> ResendRecord | None:
    return ResendRecord.objects.filter(group=group, offset_msg_id=oid).order_by("-generation").first()


def _known_copies(rec: ResendRecord) -> set[str]:
    return set(ResendRecord.objects.filter(group=rec.group, offset_msg_id=rec.offset_msg_id, state=ResendRecord.SENT)
               .exclude(pk=rec.pk).values_list("new_msg_id", flat=True))


class LeaseLost(Exception):
    """The job's run no longer holds its lease: it must stop before it sends anything else."""


class _Chunk:
    """One chunk's decisions: final outcomes, and the records to send."""

    def __init__(self, group: str, topic: str | None, force: bool, job_id: int | None,
                 keep_lease: Callable[[], bool] | None) -> None:
        self.group, self.topic, self.force, self.job_id = group, topic, force, job_id
        self.keep_lease = keep_lease
        self.done: dict[str, dict[str, Any]] = {}
        self.to_send: list[ResendRecord] = []
        self._brokers: set[str] | None = None

    # -------------------------------------------------------------------------------------- step 1 and 2
    def decide(self, oid: str) -> None:
        for _attempt in range(3):  # a lost insert race: read again
            rec = _newest(self.group, oid)
            if rec is not None and rec.state == ResendRecord.INTENT:
                self._take_over(rec)
                return
            mine = rec is not None and self.job_id is not None and rec.job_id == self.job_id
            if rec is not None and (mine or not self.force):
                self.done[oid] = _sent(rec, self.job_id)
                return
            if self._new_intent(oid, rec.generation + 1 if rec else 1):
                return
        self.done[oid] = outcome(oid, ok=False, error="another resend of this dead letter is in progress")

    def _take_over(self, rec: ResendRecord) -> None:
        now = timezone.now()
        own = self.job_id is not None and rec.job_id == self.job_id
        if not own and rec.claimed_at > now - lease():
            by = f"job {rec.job_id}" if rec.job_id else "another request"
            self.done[rec.offset_msg_id] = outcome(rec.offset_msg_id, ok=False, topic=rec.topic or None,
                                                   error=f"being resent by {by}; try again later")
            return
        taken = ResendRecord.objects.filter(pk=rec.pk, state=ResendRecord.INTENT, claimed_at=rec.claimed_at).update(
            claimed_at=now, job_id=self.job_id)
        if not taken:
            self.done[rec.offset_msg_id] = outcome(rec.offset_msg_id, ok=False,
                                                   error="another resend of this dead letter is in progress")
            return
        rec.claimed_at, rec.job_id = now, self.job_id
        try:
            copy = find_copy(rec.topic, rec.origin_msg_id, rec.keys.split(), rec.intent_at, _known_copies(rec))
        except BROKER_ERRORS as exc:
            self.done[rec.offset_msg_id] = outcome(rec.offset_msg_id, ok=False, topic=rec.topic,
                                                   error=f"could not check whether it was resent already: {exc}")
            return
        self._check_lease()  # a lookup may be long (a scan): renew before anything is sent or recorded
        if copy is None:
            self.to_send.append(rec)
            return
        log.info("resend %s/%s: found the copy %s of an unrecorded send", rec.group, rec.offset_msg_id, copy.msg_id)
        self._mark_sent(rec, copy.msg_id, copy.offset_msg_id, recovered=True)
        self.done[rec.offset_msg_id] = _sent(rec, self.job_id, fresh=True)

    # -------------------------------------------------------------------------------------- step 3
    def _known_broker(self, oid: str) -> bool:
        if self._brokers is None:
            table = broker_client.admin().cluster_info().get("brokerAddrTable", {})
            self._brokers = {a for data in table.values() for a in data.get("brokerAddrs", {}).values()}
        try:
            ip, port, _ = decode_offset_msg_id(oid)
        except CodecError:
            return False
        return f"{ip}:{port}" in self._brokers

    def _dead_letter(self, oid: str) -> MessageExt | str:
        """The dead letter ``oid`` of the group, or why not."""
        if not self._known_broker(oid):
            return f"{oid} is not a message id of a broker the name server knows"
        try:
            dead = broker_client.admin().view_message(oid)
        except BROKER_ERRORS as exc:
            return f"cannot read {oid}: {exc}"
        if dead.topic != dlq_topic(self.group):
            return f"not a dead letter of group {self.group}"
        return dead

    def _new_intent(self, oid: str, generation: int) -> bool:
        """Write the intent of generation ``generation``; False when a concurrent attempt wrote one first."""
        dead = self._dead_letter(oid)
        if isinstance(dead, str):
            self.done[oid] = outcome(oid, ok=False, error=dead)
            return True
        dest = self.topic or dead.properties.get(PROPERTY_RETRY_TOPIC) \
            or dead.properties.get(PROPERTY_DLQ_ORIGIN_TOPIC) or dead.topic
        now = timezone.now()
        try:
            with transaction.atomic():
                rec = ResendRecord.objects.create(
                    group=self.group, offset_msg_id=oid, generation=generation, job_id=self.job_id, topic=dest,
                    origin_msg_id=dead.msg_id, keys=" ".join(dead.keys), intent_at=now, claimed_at=now)
        except IntegrityError:
            return False
        self.to_send.append(rec)
        return True

    def send(self) -> None:
        """Ask the broker for the copies of :attr:`to_send` (one request per broker) and record the answers."""
        if not self.to_send:
            return
        self._check_lease()
        try:
            raw = broker_client.admin().resend_dead_letters(self.group, [r.offset_msg_id for r in self.to_send],
                                                            self.topic)
        except BROKER_ERRORS as exc:
            raw = [{"offsetMsgId": r.offset_msg_id, "ok": False, "error": str(exc)} for r in self.to_send]
        _test_hang()
        for rec, r in zip(self.to_send, raw, strict=True):
            if r.get("ok"):
                self._mark_sent(rec, str(r.get("newMsgId") or ""), str(r.get("newOffsetMsgId") or ""),
                                recovered=False, topic=str(r.get("topic") or rec.topic))
                self.done[rec.offset_msg_id] = _sent(rec, self.job_id, fresh=True)
            else:  # not known to have made no copy: the intent stays for the next attempt to settle
                self.done[rec.offset_msg_id] = outcome(rec.offset_msg_id, ok=False, topic=rec.topic,
                                                       error=str(r.get("error") or "resend failed"),
                                                       generation=rec.generation)

    def _check_lease(self) -> None:
        if self.keep_lease is not None and not self.keep_lease():
            raise LeaseLost("another run took this job over")

    def _mark_sent(self, rec: ResendRecord, new_msg_id: str, new_offset_msg_id: str, *, recovered: bool,
                   topic: str | None = None) -> None:
        rec.state, rec.new_msg_id, rec.new_offset_msg_id = ResendRecord.SENT, new_msg_id, new_offset_msg_id
        rec.recovered, rec.sent_at, rec.topic = recovered, timezone.now(), topic or rec.topic
        rec.save(update_fields=["state", "new_msg_id", "new_offset_msg_id", "recovered", "sent_at", "topic"])


def _test_hang() -> None:
    """The test hook ``DLQ_RESEND_TEST_HANG_AFTER_CHUNKS`` (0 = off): block forever once that many chunks were
    sent in this process, between the send and its record (a kill test's window)."""
    hang_after = int(getattr(settings, "DLQ_RESEND_TEST_HANG_AFTER_CHUNKS", 0) or 0)
    if not hang_after:
        return
    _sent_chunks[0] += 1
    if _sent_chunks[0] >= hang_after:
        log.warning("DLQ_RESEND_TEST_HANG_AFTER_CHUNKS=%s: hanging before recording the send", hang_after)
        while True:
            time.sleep(3600)


_sent_chunks = [0]


def resend_chunk(group: str, offset_msg_ids: list[str], topic: str | None, *, force: bool = False,
                 job_id: int | None = None, keep_lease: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """Resend the dead letters ``offset_msg_ids`` of ``group`` (to their original topic, or ``topic``), each at
    most once unless ``force`` (see the module docstring); one outcome per id, in order. A job's run passes
    ``keep_lease`` (renew its lease; False when lost): called before the send and after each broker lookup, it
    raises :class:`LeaseLost` rather than send for a run that was taken over."""
    chunk = _Chunk(group, topic, force, job_id, keep_lease)
    for oid in dict.fromkeys(offset_msg_ids):
        chunk.decide(oid)
    chunk.send()
    return [chunk.done[oid] for oid in offset_msg_ids]


def resend(group: str, offset_msg_ids: list[str], topic: str | None, *, force: bool = False,
           job_id: int | None = None) -> list[dict[str, Any]]:
    """:func:`resend_chunk` over ``offset_msg_ids`` in chunks of ``DLQ_RESEND_CHUNK``."""
    size = chunk_size()
    out: list[dict[str, Any]] = []
    for i in range(0, len(offset_msg_ids), size):
        out += resend_chunk(group, offset_msg_ids[i:i + size], topic, force=force, job_id=job_id)
    return out
