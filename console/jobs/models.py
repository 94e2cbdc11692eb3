"""The Job row: one long-running console operation (a DLQ resend in the web process, a Spark search or trace on
the Spark worker). Its status moves only through :mod:`console.jobs.states`."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Job(models.Model):
    """A long-running console operation run in a background thread (today: resending dead letters).

    ``progress`` of ``total`` items are done; ``result`` grows as the job goes (``{"results": [...]}`` with one
    outcome per item, plus ``"error"`` if the job itself failed).
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

    class Meta:
        app_label = "console"  # the table and migrations stay the console app's (console_job)
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"job {self.pk} {self.kind} {self.target} {self.status} {self.progress}/{self.total}"
