"""Per-request activation of the signed-in user's time zone, so templates render every time in it; and the
security headers Django does not set itself."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from console.selectors.preferences import user_timezone


class UserTimezoneMiddleware:
    """Activates the zone of ``request.user`` (after ``AuthenticationMiddleware``; token-authenticated API
    requests are anonymous here and stay in UTC, which is what the API's ISO 8601 times use anyway)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            timezone.activate(user_timezone(user))
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


class SecurityHeadersMiddleware:
    """Headers Django's ``SecurityMiddleware`` does not set: no powerful browser features, and responses that
    other sites may not embed as resources. (The Content-Security-Policy comes from django-csp.)"""

    HEADERS = {
        "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
        "Cross-Origin-Resource-Policy": "same-origin",
    }

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        for name, value in self.HEADERS.items():
            response.headers.setdefault(name, value)
        return response
