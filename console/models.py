"""Console state kept in Django's database."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from console.jobs.models import Job

__all__ = ["ApiToken", "AuditEvent", "Job", "UserPreference"]


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


class ApiToken(models.Model):
    """A user's REST API token (one per user), stored as the SHA-256 of its key, never the key itself.

    Invariants: ``key_hash`` is ``sha256(key)`` in hex and unique; ``key_prefix`` is the key's first
    :data:`console.services.tokens.PREFIX_CHARS` characters (indexed: a request's key is looked up by its
    prefix, then compared by hash in constant time). ``expires`` null means the token never expires (set by
    ``CONSOLE_API_TOKEN_TTL_DAYS=0``). ``last_used`` is refreshed at most once a minute per token.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    key_prefix = models.CharField(max_length=16, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"
