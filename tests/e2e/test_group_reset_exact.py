"""Browser check of resetting a group to exact offsets for one queue: inputs per queue, preview, confirm."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient, Message, Producer
from tests.e2e.conftest import shot
from tests.integration.cluster import wait_until

pytestmark = pytest.mark.integration


def test_reset_to_exact_offsets(page: Page, base_url: str, login: Callable[[Page, User], None],
                                make_user: Callable[[str], User], sdk_admin: AdminClient, sdk_producer: Producer,
                                unique: Callable[[str], str], dialogs: list[str]) -> None:
    topic, group = unique("Exact"), unique("exactg")
    sdk_admin.create_topic(topic, 2, 2)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    for i in range(6):
        sdk_producer.send(Message(topic, f"m{i}".encode()))
    login(page, make_user("operator"))
    page.goto(f"{base_url}/groups/{group}/reset/?topic={topic}")
    page.get_by_label("Exact offsets per queue").check()
    page.get_by_label("New offset of broker-a queue 0").fill("1")
    page.get_by_role("button", name="Preview").click()
    preview = page.get_by_test_id("reset-preview")
    expect(preview).to_contain_text("exact offsets (1 queue)")
    expect(page.get_by_test_id("preview-queues").locator("tbody tr")).to_have_count(1)
    shot(page, "23-reset-exact-preview")
    page.get_by_label("I understand").check()
    page.get_by_role("button", name="Apply reset").click()
    expect(page.get_by_test_id("reset-applied")).to_contain_text("Reset applied")
    committed = {r["queueId"]: r["consumerOffset"] for r in sdk_admin.consume_stats(group, topic)["offsetTable"]}
    assert committed[0] == 1
    assert dialogs == []
