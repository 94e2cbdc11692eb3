"""Must show: the API docs page renders its operations in Chromium with no network. Every request that is not to
the test server is aborted (``page.route``), so anything loaded from a CDN would fail; the Swagger UI comes from
drf-spectacular-sidecar's static files and its init script from the same origin, under the console's CSP."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, Route, expect

from tests.e2e.conftest import shot

pytestmark = pytest.mark.integration


def test_docs_render_their_operations_without_network(page: Page, base_url: str,
                                                       login: Callable[[Page, User], None],
                                                       make_user: Callable[[str], User]) -> None:
    ours = urlsplit(base_url).netloc
    blocked: list[str] = []
    violations: list[str] = []

    def only_ours(route: Route) -> None:
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_ours)
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    login(page, make_user("viewer"))
    page.get_by_role("link", name="API").click()
    page.wait_for_url(f"{base_url}/api/v1/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("broker_core console API")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() >= 20
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/topics/").first).to_be_visible()
    page.locator(".opblock-summary", has_text="/api/v1/topics/").first.click()  # expanding one works too
    expect(page.locator(".opblock-body").first).to_be_visible()
    shot(page, "docs-offline")
    assert blocked == [] and violations == []
