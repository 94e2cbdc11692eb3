"""Users, their role and their API token, for the admin's users & tokens page and API.

A token's key is shown only once, when it is created or rotated (:mod:`console.services.users`); listings show
its first characters so an admin can tell tokens apart.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from console.errors import not_found
from console.models import ApiToken
from console.roles import role_of


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def token_json(token: ApiToken | None) -> dict[str, Any] | None:
    """A token as listings show it: its key's prefix, never the key (which is not stored)."""
    if token is None:
        return None
    return {"key_prefix": token.key_prefix, "created": _iso(token.created), "expires": _iso(token.expires),
            "last_used": _iso(token.last_used)}


def user_json(user: User) -> dict[str, Any]:
    """The API shape of one user: role (``None`` when in no role group), flags and token."""
    token = getattr(user, "api_token", None)  # a missing reverse one-to-one raises AttributeError
    return {"username": user.get_username(), "role": role_of(user) if user.is_active else None,
            "is_active": user.is_active, "is_superuser": user.is_superuser,
            "last_login": user.last_login.isoformat() if user.last_login else None,
            "date_joined": user.date_joined.isoformat(), "token": token_json(token)}


def list_users(search: str = "") -> list[dict[str, Any]]:
    """Every user, sorted by username, filtered by a case-insensitive substring."""
    qs = User.objects.select_related("api_token").prefetch_related("groups").order_by("username")
    if search:
        qs = qs.filter(username__icontains=search)
    return [user_json(u) for u in qs]


def get_user(username: str) -> User:
    """The user named ``username``, or a 404."""
    user = User.objects.select_related("api_token").filter(username=username).first()
    if user is None:
        raise not_found(f"no user {username!r}")
    return user
