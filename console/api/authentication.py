"""``Authorization: Token <key>`` against hashed keys (:mod:`console.services.tokens`).

The header is the one DRF's authtoken used, so API clients keep working; what changed is the storage: only a
hash of the key is kept, tokens expire, and each use is noted (``last_used``).
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from console.services.tokens import TokenRefused, verify

KEYWORD = "Token"


class HashedTokenAuthentication(BaseAuthentication):
    """DRF authentication: ``Token <key>``; an unknown or expired key is a 401 (never a fall-through)."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: give 'Token <key>'.")
        try:
            key = parts[1].decode("ascii")
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token header: the key is ASCII.") from None
        try:
            token = verify(key)
        except TokenRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD
