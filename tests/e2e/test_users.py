"""Browser walk through the admin's users & tokens page: create a token (after confirming), use it, revoke it,
change a role; an operator has no Users link and is refused the page."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect
from rest_framework.test import APIClient

from tests.e2e.conftest import shot

pytestmark = pytest.mark.integration


def test_admin_manages_tokens_and_roles(page: Page, base_url: str, login: Callable[[Page, User], None],
                                        make_user: Callable[[str], User], dialogs: list[str]) -> None:
    target = make_user("viewer")
    login(page, make_user("admin"))
    page.get_by_role("link", name="Users").click()
    row = page.get_by_test_id(f"user-{target.username}")
    row.get_by_role("link", name="Create token").click()
    page.get_by_role("button", name="Create a token").click()
    expect(page.locator(".banner.error")).to_contain_text("confirmation")
    page.get_by_label("I understand").check()
    page.get_by_role("button", name="Create a token").click()
    key = page.get_by_test_id("token-key").inner_text().strip()
    shot(page, "21-token-created")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/me/preferences/").json()["username"] == target.username

    page.get_by_role("link", name="Back to users").click()
    row = page.get_by_test_id(f"user-{target.username}")
    expect(row.get_by_test_id("token-prefix")).to_have_text(f"{key[:8]}…")
    row.get_by_label(f"Role of {target.username}").select_option("operator")
    row.get_by_role("button", name="Set role").click()
    expect(page.locator(".flash")).to_contain_text(f"{target.username} is now operator")
    shot(page, "22-users")
    page.get_by_test_id(f"user-{target.username}").get_by_role("link", name="Revoke").click()
    page.get_by_label("I understand").check()
    page.get_by_role("button", name="Revoke the token").click()
    expect(page.get_by_test_id(f"user-{target.username}")).to_contain_text("Create token")
    assert client.get("/api/v1/me/preferences/").status_code == 401

    page.get_by_role("button", name="Log out").click()
    login(page, make_user("operator"))
    expect(page.get_by_role("link", name="Users")).to_have_count(0)
    assert page.goto(f"{base_url}/users/").status == 403
    assert dialogs == []
