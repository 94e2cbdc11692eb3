"""Main journeys in headless Chromium against a live console and a real broker."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client import AdminClient, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from tests.e2e.conftest import shot
from tests.integration.cluster import Cluster, free_port, wait_until

pytestmark = pytest.mark.integration

Login = Callable[[Page, User], None]



def push_consumer(cluster: Cluster, group: str, topic: str, listener, **kw) -> PushConsumer:  # type: ignore[no-untyped-def]
    c = PushConsumer(group, cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0, **kw)
    c.subscribe(topic)
    c.register_message_listener(listener)
    return c.start()


def test_admin_journey_topic_message_dead_letter_resend_audit(
        page: Page, base_url: str, login: Login, make_user: Callable[[str], User], cluster: Cluster,
        sdk_admin: AdminClient, unique: Callable[[str], str], dialogs: list[str]) -> None:
    admin = make_user("admin")
    login(page, admin)
    expect(page.get_by_test_id("who")).to_contain_text(admin.get_username())
    expect(page.get_by_role("cell", name="broker-a")).to_be_visible()
    shot(page, "01-dashboard")

    # create a topic (admin)
    topic = unique("Orders")
    page.get_by_role("link", name="Topics").click()
    page.get_by_text("Create a topic").click()
    form = page.get_by_test_id("create-topic")
    form.get_by_label("Name").fill(topic)
    form.get_by_label("Read queues").fill("2")
    form.get_by_label("Write queues").fill("2")
    form.get_by_role("button", name="Create topic").click()
    expect(page.get_by_role("heading", name=re.compile(f"Topic {topic}"))).to_be_visible()
    expect(page.get_by_text(f"Topic {topic} created.")).to_be_visible()
    assert len(page.get_by_test_id("stats").locator("tbody tr").all()) == 2

    # send a message with a key from the topic page
    key = unique("order-key")
    send = page.get_by_test_id("send-form")
    send.get_by_label("Body", exact=True).fill('{"order": 42, "items": ["book"]}')
    send.get_by_label("Tags").fill("created")
    send.get_by_label("Keys").fill(key)
    send.get_by_role("button", name="Send").click()
    expect(page.get_by_test_id("send-results")).to_be_visible()
    msg_id = page.get_by_test_id("sent-msg-id").inner_text()
    offset_id = page.get_by_test_id("sent-offset-id").inner_text()
    assert re.fullmatch(r"[0-9A-F]{32}", msg_id) and re.fullmatch(r"[0-9A-F]{32}", offset_id)
    shot(page, "03-topic-detail")

    page.get_by_role("link", name="Topics").click()
    page.get_by_placeholder("Search topics").fill(topic)
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name=topic)).to_be_visible()
    shot(page, "02-topics")

    # find it by topic + key
    page.get_by_role("link", name="Messages").click()
    search = page.get_by_test_id("message-search")
    search.get_by_label("Topic").fill(topic)
    search.get_by_label("Key").fill(key)
    search.get_by_role("button", name="Search").click()
    results = page.get_by_test_id("results")
    expect(results).to_contain_text(msg_id)
    shot(page, "04-message-search")
    results.get_by_role("link", name=offset_id).click()
    expect(page.get_by_test_id("msg-id")).to_have_text(msg_id)
    expect(page.get_by_test_id("keys")).to_have_text(key)
    body = page.get_by_test_id("body")
    expect(body).to_contain_text('"order": 42')  # pretty-printed JSON
    assert json.loads(body.inner_text()) == {"order": 42, "items": ["book"]}
    shot(page, "05-message-detail")

    # find it by unique id + topic, and by offset id alone
    page.goto(f"{base_url}/messages/?msg_id={msg_id}&topic={topic}")
    expect(page.get_by_test_id("offset-msg-id")).to_have_text(offset_id)
    page.goto(f"{base_url}/messages/")
    page.get_by_test_id("message-search").get_by_label("Message id").fill(offset_id.lower())
    page.get_by_test_id("message-search").get_by_role("button", name="Search").click()
    expect(page.get_by_test_id("msg-id")).to_have_text(msg_id)

    # a consumer that always fails sends it to its group's DLQ
    group = unique("billing")
    failing = push_consumer(cluster, group, topic, lambda msgs: ConsumeStatus.RECONSUME_LATER, max_reconsume_times=1)
    try:
        wait_until(lambda: len(sdk_admin.dead_letters(group)) == 1, timeout=60, what="the dead letter")
    finally:
        failing.shutdown()

    page.get_by_role("link", name="Dead letters").click()
    page.get_by_label("Consumer group").fill(group)
    page.get_by_role("button", name="Show").click()
    listing = page.get_by_test_id("dlq-list")
    expect(listing).to_contain_text(topic)
    expect(listing).to_contain_text(msg_id)
    reason = sdk_admin.dead_letters(group)[0].properties["DLQ_REASON"]
    expect(listing).to_contain_text(reason)
    shot(page, "06-dead-letters")
    listing.get_by_label("Select all").check()
    listing.get_by_role("button", name="Resend selected to their original topic").click()
    outcome = page.get_by_test_id("resend-results")
    expect(outcome).to_contain_text("resent")
    expect(outcome).to_contain_text(topic)
    shot(page, "07-resend-results")

    # a fresh consumer gets the resent message on the original topic
    got: list[MessageExt] = []
    arrived = threading.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend(msgs)
        if any(m.properties.get("RESEND_FROM_DLQ") for m in msgs):
            arrived.set()
        return ConsumeStatus.CONSUME_SUCCESS

    fresh = push_consumer(cluster, unique("fresh"), topic, listener)
    try:
        assert arrived.wait(30), f"the resent message did not arrive; got {got}"
    finally:
        fresh.shutdown()
    resent = next(m for m in got if m.properties.get("RESEND_FROM_DLQ"))
    assert resent.properties["ORIGIN_MESSAGE_ID"] == msg_id and json.loads(resent.body)["order"] == 42

    # every change is in the audit log, filterable
    page.get_by_role("link", name="Audit log").click()
    events = page.get_by_test_id("audit-events")
    for action in ("topic.create", "message.produce", "dlq.resend"):
        expect(events).to_contain_text(action)
    expect(events).to_contain_text(admin.get_username())
    shot(page, "08-audit-log")
    page.get_by_label("Action").select_option("dlq.resend")
    page.get_by_role("button", name="Filter").click()
    expect(events.locator("tbody tr")).to_have_count(1)
    expect(events).to_contain_text(group)

    # delete the topic, with a confirmation step
    page.goto(f"{base_url}/topics/{topic}/")
    page.get_by_role("link", name="Delete this topic").click()
    page.get_by_label("to confirm").fill("wrong")
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_text("Type the topic's name exactly")).to_be_visible()
    assert topic in sdk_admin.topic_list()
    page.get_by_label("to confirm").fill(topic)
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_text(f"Topic {topic} deleted.")).to_be_visible()
    wait_until(lambda: topic not in sdk_admin.topic_list(), timeout=30, what="the topic to go")

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    assert dialogs == []


def test_script_body_renders_as_text(page: Page, base_url: str, login: Login, make_user: Callable[[str], User],
                                     sdk_admin: AdminClient, unique: Callable[[str], str],
                                     dialogs: list[str]) -> None:
    topic = unique("Xss")
    sdk_admin.create_topic(topic, 1, 1)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    login(page, make_user("operator"))
    page.goto(f"{base_url}/topics/{topic}/")
    payload = "<script>alert(1)</script>"
    page.get_by_test_id("send-form").get_by_label("Body", exact=True).fill(payload)
    page.get_by_test_id("send-form").get_by_label("Keys").fill("xss")
    page.get_by_role("button", name="Send").click()
    page.get_by_test_id("sent-offset-id").click()
    expect(page.get_by_test_id("body")).to_have_text(payload)
    assert "<script>alert(1)</script>" not in page.content()  # escaped in the markup
    assert page.locator("script:not([src])").count() == 0
    shot(page, "09-script-body-as-text")
    assert dialogs == []


def test_viewer_sees_metadata_but_no_body_and_no_write_forms(
        page: Page, base_url: str, login: Login, make_user: Callable[[str], User], sdk_admin: AdminClient,
        sdk_producer: Producer, unique: Callable[[str], str]) -> None:
    topic = unique("Private")
    sdk_admin.create_topic(topic, 1, 1)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    sent = sdk_producer.send(Message(topic, b"secret salary data", keys="k1"))
    login(page, make_user("viewer"))
    page.goto(f"{base_url}/messages/{sent.offset_msg_id}/")
    expect(page.get_by_test_id("msg-id")).to_have_text(sent.msg_id)
    expect(page.get_by_test_id("no-body")).to_be_visible()
    assert "secret salary data" not in page.content()
    shot(page, "10-message-viewer")
    page.goto(f"{base_url}/topics/{topic}/")
    expect(page.get_by_test_id("send-form")).to_have_count(0)
    page.goto(f"{base_url}/topics/")
    expect(page.get_by_test_id("create-topic")).to_have_count(0)
    expect(page.get_by_role("link", name="Audit log")).to_have_count(0)
    assert page.goto(f"{base_url}/audit/").status == 403  # type: ignore[union-attr]


def test_broker_down_shows_a_friendly_banner(page: Page, base_url: str, login: Login,
                                            make_user: Callable[[str], User], settings) -> None:  # type: ignore[no-untyped-def]
    login(page, make_user("viewer"))
    settings.BROKER_CORE_NAMESRV = f"127.0.0.1:{free_port()}"
    response = page.goto(f"{base_url}/")
    assert response is not None and response.status == 503
    expect(page.get_by_test_id("unavailable")).to_contain_text("cannot be reached")
    shot(page, "11-cluster-unavailable")


def test_login_page_and_theme_toggle(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/topics/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/topics/"))
    shot(page, "00-login")
    html = page.locator("html")
    before = html.get_attribute("data-theme")
    page.get_by_role("button", name="Switch light/dark theme").click()
    after = html.get_attribute("data-theme")
    assert {before, after} == {"light", "dark"}
    page.reload()
    expect(html).to_have_attribute("data-theme", str(after))  # remembered
    shot(page, "00-login-dark")
