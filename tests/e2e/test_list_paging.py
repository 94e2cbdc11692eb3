"""The topic and consumer group list pages in Chromium with more rows than one page: search, the count line,
Next/Previous, and a topic created through the page listed at once."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient
from tests.e2e.conftest import shot
from tests.integration.cluster import Cluster, wait_until

UPDATE_AND_CREATE_TOPIC_LIST = 18


def test_topic_list_pages_searches_and_shows_a_new_topic(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str]) -> None:
    prefix = unique("Lp")
    names = [f"{prefix}-{i:03d}" for i in range(230)]
    body = json.dumps({"topicConfigList": [{"topicName": n, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
                                           for n in names]}).encode()
    sdk_admin.request(cluster.brokers["broker-a"].addr, UPDATE_AND_CREATE_TOPIC_LIST, {}, body)
    wait_until(lambda: set(names) <= set(sdk_admin.topic_list()), timeout=30, what="the routes")
    login(page, make_user("admin"))
    page.goto(f"{base_url}/topics/")
    page.get_by_label("Search topics").fill(prefix.lower())
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("230 topics, page 1 of 2")).to_be_visible()
    expect(page.get_by_role("link", name=names[199], exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=names[200], exact=True)).to_have_count(0)
    page.get_by_role("link", name="Next").click()
    expect(page.get_by_text("230 topics, page 2 of 2")).to_be_visible()
    expect(page.get_by_role("link", name=names[229], exact=True)).to_be_visible()
    shot(page, "topic-list-page-2")
    page.get_by_role("link", name="Previous").click()
    expect(page.get_by_text("230 topics, page 1 of 2")).to_be_visible()

    created = f"{prefix}-new"
    page.get_by_text("Create a topic").click()
    page.get_by_label("Name").fill(created)
    page.get_by_role("button", name="Create topic").click()
    page.goto(f"{base_url}/topics/?search={created}")
    expect(page.get_by_text("1 topic", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=created, exact=True)).to_be_visible()


def test_group_list_pages_and_searches(
        page: Page, base_url: str, login: Callable[[Page, User], None], make_user: Callable[[str], User],
        cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str]) -> None:
    prefix = unique("lpg")
    groups = [f"{prefix}-{i:03d}" for i in range(130)]
    for g in groups:
        sdk_admin.update_subscription_group(cluster.brokers["broker-a"].addr, {"groupName": g})
    login(page, make_user("viewer"))
    page.goto(f"{base_url}/groups/")
    page.get_by_label("Search groups").fill(prefix.upper())
    page.get_by_role("button", name="Filter").click()
    count = page.get_by_test_id("group-count")
    expect(count).to_have_text("130 groups, page 1 of 2")
    rows = page.get_by_test_id("groups").locator("tbody tr")
    expect(rows).to_have_count(100)
    expect(page.get_by_role("link", name=groups[0], exact=True)).to_be_visible()
    page.get_by_role("link", name="Next").click()
    expect(count).to_have_text("130 groups, page 2 of 2")
    expect(rows).to_have_count(30)
    expect(page.get_by_role("link", name=groups[129], exact=True)).to_be_visible()
    expect(rows.first.get_by_test_id("lag")).to_have_text("0")
    shot(page, "group-list-page-2")
