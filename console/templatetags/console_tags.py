"""Template helpers: role checks (``{% if user|has_role:"admin" %}``) and the user's role name."""

from __future__ import annotations

import json
from typing import Any

from django import template

from console import roles

register = template.Library()


@register.filter(name="has_role")
def has_role(user: Any, required: str) -> bool:
    """Whether ``user`` holds ``required`` or a higher role."""
    return roles.has_role(user, required)


@register.filter(name="role_of")
def role_of(user: Any) -> str:
    """The user's highest role, or ``"none"``."""
    return roles.role_of(user) or "none"


@register.filter(name="pretty_json")
def pretty_json(value: Any) -> str:
    """``value`` as indented JSON text (the template escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
