"""DRF throttles whose rates come from ``settings.CONSOLE_API_THROTTLE_RATES`` at each request.

DRF's own classes copy ``DEFAULT_THROTTLE_RATES`` once, at import, so a changed setting (a test's, or an
override) would be ignored; these read the setting when a view is called. A scope whose rate is None is off.
Counts live in Django's default cache (per process with the local-memory cache).
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


def _rate(scope: str | None) -> str | None:
    rates: dict[str, str | None] = getattr(settings, "CONSOLE_API_THROTTLE_RATES", {})
    return rates.get(scope or "")


class AnonThrottle(AnonRateThrottle):
    """Requests without credentials, by client address (``CONSOLE_API_THROTTLE_ANON``, default 60/min)."""

    def get_rate(self) -> str | None:
        return _rate(self.scope)


class UserThrottle(UserRateThrottle):
    """Authenticated requests, by user (``CONSOLE_API_THROTTLE_USER``, default 6000/min)."""

    def get_rate(self) -> str | None:
        return _rate(self.scope)
