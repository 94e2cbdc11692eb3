"""Browser check of the per-user time zone: chosen on the settings page (reached from the header), shown in the
header, and used for message times; the light/dark toggle still works alongside it."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient, Message, Producer
from tests.e2e.conftest import shot
from tests.integration.cluster import wait_until

pytestmark = pytest.mark.integration


def test_time_zone_preference_applies_to_header_and_message_times(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        sdk_admin: AdminClient, sdk_producer: Producer, unique: Callable[[str], str], dialogs: list[str]) -> None:
    topic = unique("Zoned")
    sdk_admin.create_topic(topic, 1, 1)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    sent = sdk_producer.send(Message(topic, b"tick"))

    login(page, make_user("operator"))
    expect(page.get_by_test_id("tz")).to_have_text("UTC")
    page.get_by_test_id("tz").click()
    page.get_by_label("Time zone").select_option("Asia/Kathmandu")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("tz")).to_have_text("Asia/Kathmandu")
    expect(page.get_by_test_id("current-tz")).to_have_text("Asia/Kathmandu")
    shot(page, "20-settings-timezone")

    page.goto(f"{base_url}/messages/{sent.offset_msg_id}/")
    stored = page.locator("dt:has-text('Stored') + dd")
    expect(stored).to_contain_text("+0545")
    text = stored.inner_text()
    shown = dt.datetime.strptime(text.split(" +0545")[0], "%Y-%m-%d %H:%M:%S.%f")
    now_local = dt.datetime.now(zoneinfo.ZoneInfo("Asia/Kathmandu")).replace(tzinfo=None)
    assert abs((now_local - shown).total_seconds()) < 3600, text  # local wall time, not UTC (5h45 apart)

    root = page.locator("html")
    before = root.get_attribute("data-theme")
    page.get_by_role("button", name="Switch light/dark theme").click()
    expect(root).not_to_have_attribute("data-theme", before or "")
    assert dialogs == []
