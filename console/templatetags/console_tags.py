"""Template helpers: role checks (``{% if user|has_role:"admin" %}``) and the user's role name."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django import template
from django.utils import timezone

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


@register.filter(name="perm_flags")
def perm_flags(value: Any) -> str:
    """A topic permission as flags, read then write (RocketMQ's PermName without the inherit bit): 6 -> ``RW``,
    4 -> ``R-``, 2 -> ``-W``, 0 -> ``--``; anything not a number unchanged."""
    try:
        perm = int(value)
    except (TypeError, ValueError):
        return "" if value is None else str(value)
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-")


@register.filter(name="local_time")
def local_time(value: Any) -> str:
    """An aware datetime or an ISO 8601 string (as the selectors give times) in the zone activated for the
    request (the user's preference), e.g. ``2026-11-22 09:05:54.123 CET``; anything else unchanged."""
    when = value
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(when, dt.datetime):
        return "" if value is None else str(value)
    if timezone.is_naive(when):
        when = when.replace(tzinfo=dt.UTC)
    local = timezone.localtime(when)
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    if local.microsecond:
        text += f".{local.microsecond // 1000:03d}"
    return f"{text} {local.tzname()}"
