"""API token keys: made, hashed, checked.

A key is 40 random hex characters (160 bits, the shape DRF's authtoken used, so migrated keys keep working).
The database keeps only ``sha256(key)`` and the first :data:`PREFIX_CHARS` characters; the key itself exists
once, in the response that created it. A presented key is looked up by its prefix and compared by hash in
constant time; an expired token is refused. ``last_used`` is written at most once per
:data:`LAST_USED_RESOLUTION` per token, so authenticating does not turn every API read into a write.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from console.models import ApiToken

PREFIX_CHARS = 8
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(Exception):
    """A presented key that does not authenticate (unknown, expired, or its user inactive)."""


def new_key() -> str:
    return secrets.token_hex(20)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def default_expiry(now: datetime | None = None) -> datetime | None:
    """``CONSOLE_API_TOKEN_TTL_DAYS`` from now (None when the setting is 0: tokens never expire)."""
    days = int(getattr(settings, "CONSOLE_API_TOKEN_TTL_DAYS", 90))
    return (now or timezone.now()) + timedelta(days=days) if days > 0 else None


def issue(user: object, expires_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token row for ``user`` (the caller removed any old one) and its key, which is not stored."""
    key = new_key()
    expires = timezone.now() + timedelta(days=expires_days) if expires_days else default_expiry()
    token = ApiToken.objects.create(user=user, key_prefix=key[:PREFIX_CHARS], key_hash=key_hash(key),
                                    expires=expires)
    return token, key


def verify(key: str, now: datetime | None = None) -> ApiToken:
    """The token whose key is ``key`` (its user loaded), refreshing ``last_used``; raises :class:`TokenRefused`."""
    now = now or timezone.now()
    digest = key_hash(key)
    match = None
    for token in ApiToken.objects.select_related("user").filter(key_prefix=key[:PREFIX_CHARS]):
        if hmac.compare_digest(token.key_hash, digest):
            match = token
    if match is None:
        raise TokenRefused("Invalid token.")
    if match.expires is not None and match.expires <= now:
        raise TokenRefused("Token has expired.")
    if not match.user.is_active:
        raise TokenRefused("User inactive or deleted.")
    if match.last_used is None or now - match.last_used >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=match.pk).update(last_used=now)
        match.last_used = now
    return match
