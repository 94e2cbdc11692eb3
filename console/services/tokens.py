"""API token keys: made, hashed, checked.

A key is 40 random hex characters (160 bits, the shape DRF's authtoken used, so migrated keys keep working).
The database keeps only ``sha256(key)`` and the first :data:`PREFIX_CHARS` characters; the key itself exists
once, in the response that created it. A presented key is looked up by its prefix and compared by hash in
constant time; an expired token is refused. ``last_used`` is written at most once per
:data:`LAST_USED_RESOLUTION` per token, so authenticating does not turn every API read into a write.

Verified tokens are kept in process for ``CONSOLE_API_TOKEN_CACHE_SECONDS`` (default 5; 0 turns the cache off),
keyed by the key's hash: the lookup query was about a third of a one-message REST produce. Invariants: a cached
entry is used only while younger than the setting, its expiry is checked on every use, and each use gets its own
copies of the token and user rows (a request never sees another's attributes). Saving or deleting a token or a
user clears the cache of the process that did it at once (signals, :func:`connect`); other processes (web
workers, hosts) see a revoked token or a deactivated user within the setting's seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Model
from django.db.models.base import ModelState
from django.utils import timezone

from console.models import ApiToken

PREFIX_CHARS = 8
_M = TypeVar("_M", bound=Model)
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


_cache: dict[str, tuple[float, ApiToken]] = {}  # key hash -> (monotonic time verified, token with its user)
_cache_lock = threading.Lock()
CACHE_MAX = 10_000  # entries; past it the cache starts again empty


def cache_seconds() -> float:
    return float(getattr(settings, "CONSOLE_API_TOKEN_CACHE_SECONDS", 5))


def clear_cache(*_args: Any, **_kwargs: Any) -> None:
    """Forget every verified token of this process (a signal receiver: any token or user saved or deleted)."""
    with _cache_lock:
        _cache.clear()


def connect() -> None:
    """Clear the cache whenever a token or a user row is saved or deleted in this process."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save

    for model in (ApiToken, get_user_model()):
        post_save.connect(clear_cache, sender=model, dispatch_uid=f"tokens-cache-save-{model.__name__}")
        post_delete.connect(clear_cache, sender=model, dispatch_uid=f"tokens-cache-delete-{model.__name__}")


def _lookup(key: str, digest: str) -> ApiToken | None:
    """The token row whose hash is ``digest`` (its user loaded), from the cache while fresh, else the database."""
    ttl = cache_seconds()
    if ttl > 0:
        with _cache_lock:
            hit = _cache.get(digest)
        if hit is not None and time.monotonic() - hit[0] < ttl:
            return _copied(hit[1])
    match = None
    for token in ApiToken.objects.select_related("user").filter(key_prefix=key[:PREFIX_CHARS]):
        if hmac.compare_digest(token.key_hash, digest):
            match = token
    if match is not None and ttl > 0:
        with _cache_lock:
            if len(_cache) >= CACHE_MAX:
                _cache.clear()
            _cache[digest] = (time.monotonic(), _copied(match))
    return match


def _row_copy(obj: _M) -> _M:
    """What ``copy.copy`` makes of a model instance (its own ``__dict__``, state and fields cache, the values
    shared), built directly: through the pickle protocol it was most of a cache hit."""
    new = obj.__class__.__new__(obj.__class__)
    new.__dict__.update(obj.__dict__)
    state = ModelState()
    state.__dict__.update(obj._state.__dict__)
    state.fields_cache = dict(obj._state.fields_cache)
    new._state = state
    return new


def _copied(token: ApiToken) -> ApiToken:
    """A copy of ``token`` with a copy of its user: the cached rows are never handed out or kept by reference."""
    out = _row_copy(token)
    out._state.fields_cache["user"] = _row_copy(token.user)
    return out


def verify(key: str, now: datetime | None = None) -> ApiToken:
    """The token whose key is ``key`` (its user loaded), refreshing ``last_used``; raises :class:`TokenRefused`."""
    now = now or timezone.now()
    digest = key_hash(key)
    match = _lookup(key, digest)
    if match is None:
        raise TokenRefused("Invalid token.")
    if match.expires is not None and match.expires <= now:
        raise TokenRefused("Token has expired.")
    if not match.user.is_active:
        raise TokenRefused("User inactive or deleted.")
    if match.last_used is None or now - match.last_used >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=match.pk).update(last_used=now)  # an update(): no signal, the cache stays
        match.last_used = now
        with _cache_lock:
            hit = _cache.get(digest)
            if hit is not None:
                hit[1].last_used = now
    return match
