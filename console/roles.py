"""Roles: Django groups ``viewer`` < ``operator`` < ``admin``; superusers are admins.

- viewer: read metadata (topics, routes, stats, groups, message metadata without bodies, dead-letter metadata)
- operator: + read message bodies, produce, receive/ack, resend dead letters
- admin: + create, update and delete topics, read the audit log, manage users' roles and API tokens
"""

from __future__ import annotations

from typing import Any

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)  # ascending
_RANK = {name: i for i, name in enumerate(ROLES)}


def role_of(user: Any) -> str | None:
    """The highest role of ``user`` or None (anonymous, inactive, or in no role group)."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    for role in reversed(ROLES):
        if role in names:
            return role
    return None


def has_role(user: Any, required: str) -> bool:
    """Whether ``user`` holds ``required`` or a higher role."""
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[required]
