"""Admin changes to users: role assignment and API tokens (hashed, see :mod:`console.services.tokens`), each one
audited.

Audit events never hold a token's key, only its first characters (``key_prefix``).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from rest_framework import status

from console.errors import ApiError, bad_request
from console.models import ApiToken
from console.roles import ROLES, role_of
from console.selectors.users import token_json
from console.services import tokens
from console.services.audit import record


def _token(user: User) -> ApiToken | None:
    return ApiToken.objects.filter(user=user).first()


@transaction.atomic
def create_token(actor: Any, user: User, *, rotate: bool = False, expires_days: int | None = None) -> str:
    """A new token for ``user``; returns its key (shown once, never stored). Without ``rotate`` a user who has
    a token gets a 409; with it the old token stops working at once. ``expires_days`` overrides
    ``CONSOLE_API_TOKEN_TTL_DAYS``."""
    old = _token(user)
    if old is not None and not rotate:
        raise ApiError(status.HTTP_409_CONFLICT, "token_exists",
                       f"{user.get_username()} already has a token; rotate or revoke it")
    before = token_json(old)
    if old is not None:
        old.delete()
    token, key = tokens.issue(user, expires_days)
    record(actor, "token.rotate" if old is not None else "token.create", user.get_username(),
           before=before, after=token_json(token))
    return key


@transaction.atomic
def revoke_token(actor: Any, user: User) -> None:
    """Delete ``user``'s token (404 when there is none)."""
    old = _token(user)
    if old is None:
        raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"{user.get_username()} has no token")
    before = token_json(old)
    old.delete()
    record(actor, "token.revoke", user.get_username(), before=before, after=None)


@transaction.atomic
def set_role(actor: Any, user: User, role: str | None) -> str | None:
    """Put ``user`` in exactly the role group ``role`` (``None``: no role). Superusers are always admins, and
    an admin cannot change their own role (so the console never loses its last admin by accident)."""
    if role is not None and role not in ROLES:
        raise bad_request("invalid_role", f"role must be one of {', '.join(ROLES)} or null")
    if user.is_superuser:
        raise ApiError(status.HTTP_409_CONFLICT, "superuser", f"{user.get_username()} is a superuser (always admin)")
    if getattr(actor, "pk", None) == user.pk:
        raise ApiError(status.HTTP_409_CONFLICT, "own_role", "you cannot change your own role")
    before = role_of(user)
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role is not None:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    after = role_of(user)
    if before != after:
        record(actor, "user.role", user.get_username(), before={"role": before}, after={"role": after})
    return after
