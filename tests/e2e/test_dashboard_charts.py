"""Browser: the dashboard shows charts once samples exist. Two real sampling passes (``console.monitoring.sampling``
against the live broker, stamped a minute apart) with messages produced in between, then the dashboard in
headless Chromium: the rate chart, the topic chart (naming the topic) and the disk chart are drawn, the range
selector switches to 24 h, and a screenshot is saved."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient, Message, Producer
from console.monitoring import sampling
from tests.e2e.conftest import shot
from tests.integration.cluster import wait_until
from workers import services

pytestmark = pytest.mark.integration


def test_dashboard_shows_rate_topic_and_disk_charts_after_sampling(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        sdk_admin: AdminClient, sdk_producer: Producer, unique: Callable[[str], str]) -> None:
    topic = unique("Charted")
    sdk_admin.create_topic(topic, 1, 1)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    brokers = services.broker_addrs()
    now = timezone.now()
    sampling.sample_all(brokers, now=now - timedelta(seconds=60))
    for i in range(120):
        sdk_producer.send(Message(topic, b"tick %d" % i))
    # the broker dispatches to the ConsumeQueue after the send returns: sample once all 120 are countable
    wait_until(lambda: sum(r["maxOffset"] for r in sdk_admin.topic_stats(topic)) == 120, timeout=30,
               what="dispatch of the 120 messages")
    sampling.sample_all(brokers, now=now)

    login(page, make_user("viewer"))
    rates = page.get_by_test_id("chart-rates")
    expect(rates.locator("polyline")).to_have_count(2)
    expect(page.get_by_test_id("chart-topics")).to_contain_text(topic)
    expect(page.get_by_test_id("chart-topics").locator(f'[data-series="{topic}"]')).to_contain_text("2.0")
    disk = page.get_by_test_id("chart-disk")
    expect(disk.locator("svg")).to_be_visible()
    expect(disk.locator('polyline[stroke="#2563eb"]')).to_have_count(1)  # broker-a (a flat line: zero height)
    expect(disk.locator("[data-series=broker-a]")).to_be_visible()
    shot(page, "dashboard-charts")
    page.get_by_test_id("range-24h").click()
    expect(page.get_by_test_id("range-24h")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("chart-rates").locator("polyline")).to_have_count(2)
