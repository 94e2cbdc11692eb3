"""The Job row: one long-running console operation (a DLQ resend or a Spark search or trace, each run by a Celery
worker). Its status moves only through :mod:`console.jobs.states` (and, for resends, the lease transitions of
:mod:`console.jobs.resend_lease`). :class:`ResendRecord` remembers every dead letter resent, for idempotency."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Job(models.Model):
    """A long-running console operation run by a Celery worker (resending dead letters, Spark search/trace).

    ``progress`` of ``total`` items are done; ``result`` grows as the job goes (``{"results": [...]}`` with one
    outcome per item, plus ``"error"`` if the job itself failed). ``worker`` and ``heartbeat`` are the lease of
    the run that holds a resend job (see :mod:`console.jobs.resend_lease`); Spark jobs leave them empty.
    """

    PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
    # Spark jobs: the console asks for a cancel (cancelling); the worker stops the Spark job (cancelled)
    CANCELLING, CANCELLED = "cancelling", "cancelled"
    STATUSES = [(s, s) for s in (PENDING, RUNNING, DONE, FAILED, CANCELLING, CANCELLED)]

    kind = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=16, choices=STATUSES, default=PENDING, db_index=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    finished = models.DateTimeField(null=True, blank=True)
    progress = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="console_jobs")
    worker = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "console"  # the table and migrations stay the console app's (console_job)
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"job {self.pk} {self.kind} {self.target} {self.status} {self.progress}/{self.total}"


class ResendRecord(models.Model):
    """One resend of one dead letter: (``group``, ``offset_msg_id`` of the dead letter, ``generation``) -> the new
    message. Generation 1 is the first resend; a forced resend adds the next generation.

    Invariants (see :mod:`console.jobs.resend_records`):

    1. A row is written as an ``intent`` *before* the broker is asked to resend, and becomes ``sent`` with the
       new ids after the broker answered. At most one row per (group, dead letter) is an intent.
    2. An ``intent`` row is uncertain: the copy may or may not exist. Whoever takes it over (the same job's next
       run at once; anyone else once ``claimed_at`` is older than the lease) first looks for the copy on the
       broker (a message of ``topic`` with ``ORIGIN_MESSAGE_ID`` = ``origin_msg_id`` stored since
       ``intent_at``, not already recorded) and adopts it, and sends only when there is none.
    3. A send the broker refused before storing anything deletes the intent (nothing to remember).

    Crash behaviour: a process killed between the send and the ``sent`` update leaves the intent; rule 2 turns
    it into ``sent`` with the copy's ids, so the dead letter is resent exactly once.
    """

    INTENT, SENT = "intent", "sent"

    group = models.CharField(max_length=255)
    offset_msg_id = models.CharField(max_length=32)  # the dead letter's
    generation = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=8, choices=[(INTENT, INTENT), (SENT, SENT)], default=INTENT)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="resend_records")
    topic = models.CharField(max_length=255, blank=True)  # where the copy went (or was asked to go)
    origin_msg_id = models.CharField(max_length=64, blank=True)  # the copy's ORIGIN_MESSAGE_ID
    keys = models.TextField(blank=True)  # the dead letter's KEYS (space-separated): the copy carries them too
    new_msg_id = models.CharField(max_length=64, blank=True)
    new_offset_msg_id = models.CharField(max_length=32, blank=True)
    recovered = models.BooleanField(default=False)  # the ids were found on the broker, not answered by it
    intent_at = models.DateTimeField()  # first intent: copies stored before it are not this resend's
    claimed_at = models.DateTimeField()  # last time an owner took the intent (staleness)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "console"
        constraints = [
            models.UniqueConstraint(fields=["group", "offset_msg_id", "generation"],
                                    name="console_resend_once_per_generation"),
            models.UniqueConstraint(fields=["group", "offset_msg_id"], condition=models.Q(state="intent"),
                                    name="console_resend_one_intent"),
        ]
        indexes = [models.Index(fields=["group", "offset_msg_id"], name="console_resend_msg")]

    def __str__(self) -> str:
        return f"resend {self.group} {self.offset_msg_id}#{self.generation} {self.state} -> {self.new_msg_id}"
