"""Browser: a group's clients with their running info (refreshed on demand), and "consume directly with client X"
on a message's page (operators; the client's answer and its time shown; audited; viewers see no form)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient
from console.models import AuditEvent
from tests.console.test_clients import live_consumer
from tests.e2e.conftest import shot
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration


def test_group_clients_page_shows_running_info(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str]) -> None:
    with live_consumer(cluster, sdk_admin, unique) as live:
        login(page, make_user("viewer"))
        page.goto(f"{base_url}/groups/{live.group}/")
        page.get_by_test_id("running-info-link").click()
        card = page.locator(f'[data-client="{live.client_id}"]')
        expect(card.get_by_test_id("client-subscriptions")).to_contain_text(live.topic)
        rows = card.get_by_test_id("client-queues").locator("tbody tr", has_text=live.topic)
        expect(rows).to_have_count(2)
        expect(card.get_by_test_id("client-rates")).to_contain_text(live.topic)
        expect(card.get_by_test_id("client-facts")).to_contain_text("CONSUME_FROM_FIRST_OFFSET")
        first = page.get_by_test_id("asked-at").inner_text()
        page.wait_for_timeout(1100)  # the page shows times to the millisecond; a refresh asks again
        page.get_by_test_id("refresh-clients").click()
        expect(page.get_by_test_id("asked-at")).not_to_have_text(first)
        shot(page, "40-group-clients-running-info")


def test_consume_directly_from_the_message_page(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str]) -> None:
    with live_consumer(cluster, sdk_admin, unique) as live:
        login(page, make_user("viewer"))
        page.goto(f"{base_url}/messages/{live.ok_id}/")
        expect(page.get_by_test_id("offset-msg-id")).to_have_text(live.ok_id)
        expect(page.get_by_test_id("consume-directly")).to_have_count(0)
        page.context.clear_cookies()

        login(page, make_user("operator"))
        page.goto(f"{base_url}/messages/{live.ok_id}/")
        page.get_by_test_id("direct-target").select_option(f"{live.group} {live.client_id}")
        page.get_by_test_id("direct-submit").click()
        expect(page.get_by_test_id("direct-consume-result")).to_have_text("CR_SUCCESS")
        expect(page.get_by_test_id("direct-result")).to_contain_text(live.client_id)
        shot(page, "41-message-consume-directly-success")

        page.goto(f"{base_url}/messages/{live.boom_id}/")
        page.get_by_test_id("direct-target").select_option(f"{live.group} {live.client_id}")
        page.get_by_test_id("direct-submit").click()
        expect(page.get_by_test_id("direct-consume-result")).to_have_text("CR_THROW_EXCEPTION")
        expect(page.get_by_test_id("direct-remark")).to_contain_text("ValueError: cannot handle boom")
        shot(page, "42-message-consume-directly-exception")
        assert [e.target for e in AuditEvent.objects.filter(action="message.consume_directly").order_by("id")] == [
            live.ok_id, live.boom_id]
