"""Changes to a user's own display preferences (audited like every other change)."""

from __future__ import annotations

from typing import Any

from console.errors import bad_request
from console.models import UserPreference
from console.selectors.preferences import is_timezone, user_timezone
from console.services.audit import record


def set_timezone(user: Any, name: str) -> str:
    """Make ``name`` (an IANA zone, e.g. ``Europe/Paris``) the zone ``user``'s pages show times in."""
    if not is_timezone(name):
        raise bad_request("invalid_timezone", f"{name!r} is not an IANA time zone")
    before = user_timezone(user)
    UserPreference.objects.update_or_create(user=user, defaults={"timezone": name})
    if before != name:
        record(user, "user.preferences", user.get_username(), before={"timezone": before}, after={"timezone": name})
    return name
