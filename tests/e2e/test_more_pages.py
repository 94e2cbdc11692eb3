"""Browser walk through the cluster, consumer group (with an offset reset), dead-letter list / export / resend
job, and time-range browse pages, with a screenshot of each in ``tests/e2e/artifacts/``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient, Message, Producer
from console.jobs.resend import run_resend_job
from console.views import messages as message_views
from tests.console.test_groups_dlq import _make_dead_letter
from tests.e2e.conftest import shot
from tests.integration.cluster import Cluster
from tests.integration.test_cluster import wait_until

pytestmark = pytest.mark.integration

Login = Callable[[Page, User], None]


def test_cluster_groups_dead_letters_and_browse_pages(
        page: Page, base_url: str, login: Login, make_user: Callable[[str], User], cluster: Cluster,
        sdk_admin: AdminClient, sdk_producer: Producer, unique: Callable[[str], str], dialogs: list[str],
        monkeypatch: pytest.MonkeyPatch, settings, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    # the resend job is published to a Redis database no worker reads; the test runs the worker's side itself
    settings.CELERY_BROKER_URL = redis_url.rsplit("/", 1)[0] + "/4"
    topic = unique("Shipments")
    sdk_admin.create_topic(topic, 2, 2)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    group = unique("shipping")
    _make_dead_letter(cluster, topic, group)  # one message, dead-lettered by the group
    sent = [sdk_producer.send(Message(topic, json.dumps({"n": i}).encode(), keys=f"ship-{i}")) for i in range(4)]

    login(page, make_user("operator"))

    # cluster / routes
    page.get_by_role("link", name="Cluster").click()
    expect(page.get_by_test_id("cluster-brokers")).to_contain_text("broker-a")
    page.get_by_placeholder("Search topics").fill(topic)
    page.get_by_role("button", name="Filter").click()
    routes = page.get_by_test_id("routes")
    expect(routes).to_contain_text(topic)
    expect(routes).to_contain_text("read-write (6)")
    shot(page, "12-cluster-routes")

    # consumer groups: the group is known from its DLQ topic; its queues; reset with preview and confirm
    page.get_by_role("link", name="Consumer groups").click()
    page.get_by_placeholder("Search groups").fill(group)
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_test_id("groups")).to_contain_text("dlq_topic")
    shot(page, "13-consumer-groups")
    page.get_by_role("link", name=group, exact=True).click()
    page.get_by_label("Topic").fill(topic)
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_test_id("queues")).to_have_count(1)
    shot(page, "14-group-detail")
    page.get_by_role("link", name="Reset offsets…").click()
    page.get_by_label("Earliest retained message").check()
    page.get_by_role("button", name="Preview").click()
    preview = page.get_by_test_id("reset-preview")
    expect(preview).to_contain_text("Nothing has changed yet")
    expect(page.get_by_test_id("preview-queues").locator("tbody tr")).to_have_count(2)
    shot(page, "15-reset-preview")
    page.get_by_role("button", name="Apply reset").click()
    expect(page.get_by_text("Tick the box to confirm the reset.")).to_be_visible()
    page.get_by_role("checkbox").check()
    page.get_by_role("button", name="Apply reset").click()
    expect(page.get_by_test_id("reset-applied")).to_be_visible()
    shot(page, "16-reset-applied")

    # dead letters: the list, a group's page, exports, resend everything shown as a job
    page.get_by_role("link", name="Dead letters").click()
    page.get_by_placeholder("Search groups").fill(group)
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_test_id("dlq-groups")).to_contain_text(group)
    shot(page, "17-dead-letter-groups")
    page.get_by_test_id("dlq-groups").get_by_role("link", name=group, exact=True).click()
    expect(page.get_by_test_id("dlq-list")).to_contain_text(topic)
    with page.expect_download() as download:
        page.get_by_test_id("export-all-jsonl").click()
    (row,) = [json.loads(line) for line in open(download.value.path(), encoding="utf-8")]
    assert row["origin_topic"] == topic and row["body"] == "poison"
    page.get_by_test_id("dlq-list").get_by_label("Select all").check()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export selected (CSV)").click()
    assert "poison" in open(download.value.path(), encoding="utf-8").read()
    shot(page, "18-dead-letters-actions")
    page.get_by_role("button", name="Resend all 1 shown (background job)").click()
    page.wait_for_url(f"{base_url}/jobs/*/")
    expect(page.get_by_test_id("job-status")).to_have_text("pending")
    assert run_resend_job(int(page.url.rstrip("/").split("/")[-1]), "e2e-worker@localhost")["status"] == "done"
    expect(page.get_by_test_id("job-status")).to_have_text("done", timeout=30_000)  # the page refreshes itself
    expect(page.get_by_test_id("job-progress")).to_have_text("1 / 1")
    expect(page.get_by_test_id("job-results")).to_contain_text("resent")
    shot(page, "19-resend-job")

    # time-range browse, 3 per page here: the first page says it is truncated and links to the next
    monkeypatch.setattr(message_views, "BROWSE_PAGE", 3)
    page.get_by_role("link", name="Messages").click()
    page.get_by_role("link", name="Browse by time range").click()
    form = page.get_by_test_id("browse-form")
    form.get_by_label("Topic").fill(topic)
    begin = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
    form.get_by_label("From (UTC)").fill(begin)
    form.get_by_role("button", name="Browse").click()
    results = page.get_by_test_id("results")
    expect(page.get_by_test_id("truncated")).to_contain_text("Truncated")
    expect(results.locator("tbody tr")).to_have_count(3)
    shown = results.inner_text()
    shot(page, "20-browse-by-time")
    page.get_by_test_id("next-page").click()
    expect(page.get_by_test_id("complete")).to_be_visible()  # the dead letter's original and its resend: 6 in all
    expect(results.locator("tbody tr")).to_have_count(3)
    shown += results.inner_text()
    assert all(s.offset_msg_id in shown for s in sent)
    shot(page, "21-browse-last-page")
    assert dialogs == []
