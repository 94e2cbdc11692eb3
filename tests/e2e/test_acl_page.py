"""Browser: the broker ACL page on two real ACL brokers. An admin creates an account on every broker (per-broker
result, the generated secret shown once), sees it listed without its secret, and a broker changed behind the
console's back shows out of step; a viewer sees the accounts and versions but no form and no secret."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient
from console import broker_client
from tests.e2e.conftest import shot
from tests.integration.acl_two_brokers import ADMIN, TwoBrokers, two_acl_brokers

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def acl_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoBrokers]:
    with two_acl_brokers(tmp_path_factory.mktemp("acl-e2e")) as b:
        yield b


def test_acl_page_applies_an_account_to_every_broker(
        page: Page, base_url: str, settings, login: Callable[[Page, User], None],  # type: ignore[no-untyped-def]
        make_user: Callable[[str], User], acl_brokers: TwoBrokers) -> None:
    settings.BROKER_CORE_NAMESRV = acl_brokers.namesrv
    settings.BROKER_CORE_ACCESS_KEY, settings.BROKER_CORE_SECRET_KEY = ADMIN.access_key, ADMIN.secret_key
    try:
        login(page, make_user("admin"))
        page.goto(f"{base_url}/acl/")
        expect(page.get_by_test_id("acl-in-step")).to_be_visible()
        expect(page.get_by_test_id("acl-broker")).to_have_count(2)
        form = page.get_by_test_id("acl-account-form")
        form.get_by_label("Access key").fill("browser-app1")
        form.get_by_label("Default topic perm").select_option("PUB")
        form.get_by_label("Topic perms").fill("orders=PUB|SUB\naudit=DENY")
        form.get_by_test_id("acl-save").click()
        result = page.get_by_test_id("acl-result")
        expect(result.get_by_test_id("acl-result-row")).to_have_count(2)
        expect(result).to_contain_text("every broker")
        secret = page.get_by_test_id("acl-secret-value").inner_text()
        assert len(secret) >= 20
        row = page.locator('[data-testid="acl-account"][data-key="browser-app1"]')
        expect(row).to_contain_text("orders=PUB|SUB")
        shot(page, "43-acl-account-applied")
        page.goto(f"{base_url}/acl/")
        expect(page.get_by_test_id("acl-secret")).to_have_count(0)
        assert secret not in page.content()

        with AdminClient(acl_brokers.namesrv, credentials=ADMIN) as sdk:  # one broker changed by hand
            sdk.acl_update_account(acl_brokers.second.addr, {"accessKey": "browser-app1", "defaultTopicPerm": "SUB"})
        page.goto(f"{base_url}/acl/")
        expect(page.get_by_test_id("acl-out-of-step")).to_be_visible()
        shot(page, "44-acl-brokers-out-of-step")
        row = page.locator('[data-testid="acl-account"][data-key="browser-app1"]')
        row.get_by_test_id("acl-delete-confirm").check()
        row.get_by_test_id("acl-delete").click()
        expect(page.get_by_test_id("acl-result")).to_contain_text("Account browser-app1 deleted: every broker")
        expect(page.get_by_test_id("acl-result-row")).to_have_count(2)
        expect(page.locator('[data-testid="acl-account"][data-key="browser-app1"]')).to_have_count(0)
        page.context.clear_cookies()

        login(page, make_user("viewer"))
        page.goto(f"{base_url}/acl/")
        expect(page.locator('[data-testid="acl-account"][data-key="acl-reader1"]')).to_be_visible()
        expect(page.get_by_test_id("acl-account-form")).to_have_count(0)
        expect(page.get_by_test_id("acl-delete")).to_have_count(0)
        assert "admin-secret" not in page.content() and secret not in page.content()
    finally:
        broker_client.reset()
