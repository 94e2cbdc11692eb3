"""Security headers and the Content-Security-Policy on pages and the API; the pages carry no inline script or
style, so the policy needs no 'unsafe-inline'."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client


def test_pages_send_a_strict_csp_and_security_headers() -> None:
    resp = Client().get("/login/")
    csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Referrer-Policy"] == "same-origin"
    assert "camera=()" in resp.headers["Permissions-Policy"]


def test_rendered_pages_have_no_inline_scripts_styles_or_handlers() -> None:
    root = User.objects.create_superuser("csp-root", "", "pw")
    client = Client()
    client.force_login(root)
    for path in ("/", "/alerts/", "/users/", "/audit/", "/settings/", "/search/", "/trace/", "/api/v1/docs/"):
        html = client.get(path).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), path
        assert "<style" not in html and not re.search(r"\sstyle=\"", html), path
        assert not re.search(r"\son[a-z]+=\"", html), path


def test_the_docs_page_loads_swagger_ui_from_our_own_static_files() -> None:
    html = Client().get("/api/v1/docs/").content.decode()
    assert "cdn" not in html.lower()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    script = Client().get("/api/v1/docs/?script=")
    assert script.status_code == 200 and b"SwaggerUIBundle" in script.content
