"""Reads of a user's display preferences: the time zone pages render times in."""

from __future__ import annotations

import functools
import zoneinfo
from typing import Any

from console.models import UserPreference

DEFAULT_TIMEZONE = "UTC"


@functools.cache
def timezones() -> tuple[str, ...]:
    """Every IANA zone name zoneinfo knows, sorted (``UTC`` included)."""
    return tuple(sorted(zoneinfo.available_timezones() | {DEFAULT_TIMEZONE}))


def is_timezone(name: str) -> bool:
    return name in timezones()


def user_timezone(user: Any) -> str:
    """The zone ``user`` chose, or UTC (anonymous users, users without a preference, a zone since removed)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return DEFAULT_TIMEZONE
    name = UserPreference.objects.filter(user_id=user.pk).values_list("timezone", flat=True).first()
    return name if name and is_timezone(name) else DEFAULT_TIMEZONE


def preferences(user: Any) -> dict[str, Any]:
    """``{"username", "timezone"}`` as the API returns them."""
    return {"username": user.get_username(), "timezone": user_timezone(user)}
