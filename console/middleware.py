"""Per-request activation of the signed-in user's time zone, so templates render every time in it; the security
headers Django does not set itself; and django-csp's Content-Security-Policy middleware with its policy built once."""

from __future__ import annotations

import http.client
from collections.abc import Callable
from typing import Any

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject
from csp.middleware import CSPMiddleware as _UpstreamCSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.utils.functional import SimpleLazyObject, empty

from console.selectors.preferences import user_timezone


def _may_have_user(request: HttpRequest) -> bool:
    """False only when ``request.user`` is certainly anonymous without loading it: the not yet evaluated user of
    ``AuthenticationMiddleware`` on a request without a session key (a token-authenticated API request), whose
    evaluation (the session, the auth backend) was ~20 us of each API request."""
    user = request.__dict__.get("user")
    session = getattr(request, "session", None)
    return not (isinstance(user, SimpleLazyObject) and user._wrapped is empty and session is not None
                and session.session_key is None)


class UserTimezoneMiddleware:
    """Activates the zone of ``request.user`` (after ``AuthenticationMiddleware``; token-authenticated API
    requests are anonymous here and stay in UTC, which is what the API's ISO 8601 times use anyway)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None) if _may_have_user(request) else None
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


# (report only?, the response attribute that exempts it, the setting that configures it)
_CSP_KINDS = ((False, HEADER, "_csp_exempt", "CONTENT_SECURITY_POLICY"),
              (True, HEADER_REPORT_ONLY, "_csp_exempt_ro", "CONTENT_SECURITY_POLICY_REPORT_ONLY"))
_csp_from_settings: dict[bool, str] = {}  # report only? -> the header built from the settings alone


def _forget_csp(*, setting: str, **_kwargs: Any) -> None:
    if setting.startswith("CONTENT_SECURITY_POLICY"):
        _csp_from_settings.clear()


setting_changed.connect(_forget_csp, dispatch_uid="console.middleware.csp")


class CSPMiddleware(_UpstreamCSPMiddleware):
    """django-csp 4's ``CSPMiddleware`` with the same headers, checks and nonce handling; what changes is that a
    response with no policy of its own (no ``@csp_update``/``@csp_replace``/``@csp_override``) on a request that
    used no nonce takes the header built once from the settings (rebuilt after a settings change) instead of
    rebuilding it (two ``dataclasses.asdict`` and two ``build_policy`` per response: about 80 us, the dearest
    middleware of an API request). Every other response is built by django-csp's ``build_policy`` as before."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if response.status_code in (http.client.INTERNAL_SERVER_ERROR, http.client.NOT_FOUND) and settings.DEBUG:
            return response
        for report_only, header, exempt, setting in _CSP_KINDS:
            parts = self.get_policy_parts(request=request, response=response, report_only=report_only)
            if parts.config is None and parts.update is None and parts.replace is None and parts.nonce is None:
                csp = _csp_from_settings.get(report_only)
                if csp is None:
                    csp = _csp_from_settings[report_only] = build_policy(report_only=report_only)
            else:
                csp = build_policy(config=parts.config, update=parts.update, replace=parts.replace,
                                   nonce=parts.nonce, report_only=report_only)
            if csp and header not in response and getattr(response, exempt, False) is False:
                prefixes = (getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES", None) or ()
                if not request.path_info.startswith(tuple(prefixes)):
                    response[header] = csp
        if getattr(request, "_csp_nonce", None) is None:  # a nonce asked for from now on is an error, as upstream
            request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response
