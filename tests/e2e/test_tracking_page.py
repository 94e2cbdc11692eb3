"""Browser: the message page's "Consumption by group" table shows a consumed, a pending, a filtered and a
dead-lettered group for one message."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient
from tests.console.test_tracking import four_groups
from tests.e2e.conftest import shot
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration


def test_message_page_shows_consumption_by_group(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str]) -> None:
    with four_groups(cluster, sdk_admin, unique) as sc:
        login(page, make_user("viewer"))
        page.goto(f"{base_url}/messages/{sc.msg_id}/?topic={sc.topic}")
        table = page.get_by_test_id("consumption")
        expect(table.get_by_test_id("consumption-row")).to_have_count(4)
        for state, group in sc.groups.items():
            row = table.locator(f'[data-group="{group}"]')
            expect(row.get_by_test_id("consumption-state")).to_have_text(state)
        expect(table.locator(f'[data-group="{sc.groups["filtered"]}"]')).to_contain_text("blue")
        shot(page, "30-message-consumption-by-group")
