"""Console state kept in Django's database."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from console.jobs.models import Job

__all__ = ["AuditEvent", "Job", "UserPreference"]


class AuditEvent(models.Model):
    """One change made through the console (API or pages): who, when, what, before/after, and whether it worked.

    ``username`` is copied so the trail survives the user's deletion.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="audit_events")
    username = models.CharField(max_length=150, blank=True, db_index=True)
    timestamp = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=300)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    ok = models.BooleanField(default=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.timestamp:%Y-%m-%d %H:%M:%S} {self.username or '-'} {self.action} {self.target}"


class UserPreference(models.Model):
    """A user's display preferences: the IANA time zone every page shows times in (activated per request by
    :class:`console.middleware.UserTimezoneMiddleware`). A user without a row sees UTC."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="console_preference")
    timezone = models.CharField(max_length=64, default="UTC")

    def __str__(self) -> str:
        return f"{self.user} {self.timezone}"
