"""The console's CSP middleware (django-csp's, with the policy from the settings built once) sets exactly the
headers django-csp's own middleware sets, on every kind of response, and follows a settings change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from csp.constants import NONCE, SELF
from csp.middleware import CSPMiddleware as UpstreamCSPMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from console.middleware import CSPMiddleware

REPORT_ONLY = {"DIRECTIVES": {"default-src": [SELF], "script-src": [SELF, NONCE], "report-uri": "/csp-report/"}}


def _plain(response: HttpResponse) -> None:
    pass


def _update(response: HttpResponse) -> None:
    response._csp_update = {"img-src": ["https://img.example"]}  # type: ignore[attr-defined]


def _replace(response: HttpResponse) -> None:
    response._csp_replace = {"script-src": ["https://js.example"]}  # type: ignore[attr-defined]


def _config(response: HttpResponse) -> None:
    response._csp_config = {"default-src": ["https://only.example"]}  # type: ignore[attr-defined]


def _exempt(response: HttpResponse) -> None:
    response._csp_exempt = True  # type: ignore[attr-defined]


def _ro_update(response: HttpResponse) -> None:
    response._csp_update_ro = {"img-src": ["https://ro.example"]}  # type: ignore[attr-defined]


def _preset(response: HttpResponse) -> None:
    response["Content-Security-Policy"] = "default-src 'none'"


SHAPES: list[Callable[[HttpResponse], None]] = [_plain, _update, _replace, _config, _exempt, _ro_update, _preset]


def _headers(middleware_class: type, shape: Callable[[HttpResponse], None], *, nonce: bool, status: int = 200,
             path: str = "/api/v1/topics/") -> tuple[dict[str, str], Any]:
    request = RequestFactory().get(path)

    def view(req: HttpRequest) -> HttpResponse:
        if nonce:
            str(req.csp_nonce)  # type: ignore[attr-defined]
        response = HttpResponse(status=status)
        shape(response)
        return response

    response = middleware_class(view)(request)
    return ({k: v for k, v in response.headers.items() if k.startswith("Content-Security-Policy")},
            request.csp_nonce)  # type: ignore[attr-defined]


@pytest.mark.parametrize("report_only", [False, True])
@pytest.mark.parametrize("nonce", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__)
def test_same_headers_as_django_csp(settings, shape: Callable[[HttpResponse], None], nonce: bool,  # type: ignore[no-untyped-def]
                                    report_only: bool) -> None:
    if report_only:
        settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = REPORT_ONLY
    for _ in range(2):  # the second time from the built policy
        ours, our_nonce = _headers(CSPMiddleware, shape, nonce=nonce)
        theirs, their_nonce = _headers(UpstreamCSPMiddleware, shape, nonce=nonce)
        if nonce:  # a fresh nonce per request: compare with it masked
            ours = {k: v.replace(str(our_nonce), "N") for k, v in ours.items()}
            theirs = {k: v.replace(str(their_nonce), "N") for k, v in theirs.items()}
        else:  # asking for a nonce once the headers are written is an error in both
            for late in (our_nonce, their_nonce):
                with pytest.raises(Exception, match="not available after the CSP header"):
                    str(late)
        assert ours == theirs
        assert ("Content-Security-Policy" in ours) == (shape is not _exempt)


def test_excluded_prefixes_and_debug_error_pages_as_django_csp(settings) -> None:  # type: ignore[no-untyped-def]
    settings.CONTENT_SECURITY_POLICY = {**settings.CONTENT_SECURITY_POLICY, "EXCLUDE_URL_PREFIXES": ["/api/"]}
    for path in ("/api/v1/topics/", "/login/"):
        assert _headers(CSPMiddleware, _plain, nonce=False, path=path)[0] == \
            _headers(UpstreamCSPMiddleware, _plain, nonce=False, path=path)[0]
    assert not _headers(CSPMiddleware, _plain, nonce=False)[0]
    settings.DEBUG = True
    for status in (404, 500):
        assert not _headers(CSPMiddleware, _plain, nonce=False, status=status, path="/login/")[0]


def test_a_settings_change_rebuilds_the_policy(settings) -> None:  # type: ignore[no-untyped-def]
    before = _headers(CSPMiddleware, _plain, nonce=False)[0]["Content-Security-Policy"]
    assert "https://new.example" not in before
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": [SELF, "https://new.example"]}}
    after = _headers(CSPMiddleware, _plain, nonce=False)[0]
    assert after == _headers(UpstreamCSPMiddleware, _plain, nonce=False)[0]
    assert "https://new.example" in after["Content-Security-Policy"]


def test_the_console_serves_the_api_through_it(admin) -> None:  # type: ignore[no-untyped-def]
    resp = admin.get("/api/v1/topics/")
    assert resp.headers["Content-Security-Policy"] == \
        _headers(UpstreamCSPMiddleware, _plain, nonce=False)[0]["Content-Security-Policy"]
