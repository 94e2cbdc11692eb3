"""Browser, every part real (the console and a ``celery -Q spark`` worker with its own SparkSession, as the Search
page test runs them): client-side trace records (RocketMQ's TraceDataEncoder layout, as Java and C++ clients with
message trace on write them into RMQ_SYS_TRACE_TOPIC) appear in the message's trace timeline beside the broker's
records, marked as the client's, with the send cost and the consumer group's consume step."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Browser

from broker_core.client import AdminClient, Message, Producer
from broker_core.codec.trace_data import encode_trace_record
from tests.e2e.conftest import log_in, shot
from tests.e2e.test_search_page import PASSWORD, console_url  # noqa: F401 - the module's stack fixture
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


def test_trace_page_merges_client_records(console_url: str, browser: Browser, cluster: Cluster,  # noqa: F811
                                          sdk_admin: AdminClient, sdk_producer: Producer,
                                          unique: Callable[[str], str]) -> None:
    topic = unique("ClientTracePage")
    sdk_admin.create_topic(topic, 1, 1)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what="the topic's route")
    sent = sdk_producer.send(Message(topic, b"traced on the page", keys="page-trace"))
    stored = sdk_admin.view_message(sent.offset_msg_id)
    group = unique("page-consumers")
    records = (encode_trace_record({"type": "Pub", "timestamp": stored.born_timestamp, "groupName": "page-producers",
                                    "topic": topic, "msgId": sent.msg_id, "keys": "page-trace", "costTime": 3,
                                    "storeHost": cluster.brokers["broker-a"].addr, "bodyLength": 18,
                                    "offsetMsgId": sent.offset_msg_id, "success": True})
               + encode_trace_record({"type": "SubBefore", "timestamp": stored.store_timestamp + 10,
                                      "groupName": group, "requestId": "PAGE-REQ", "msgId": sent.msg_id,
                                      "retryTimes": 0, "keys": "page-trace"})
               + encode_trace_record({"type": "SubAfter", "requestId": "PAGE-REQ", "msgId": sent.msg_id,
                                      "costTime": 9, "success": True, "keys": "page-trace", "contextCode": "SUCCESS",
                                      "timestamp": stored.store_timestamp + 19, "groupName": group}))
    with Producer(unique("_INNER_TRACE_PRODUCER"), cluster.namesrv) as tp:
        tp.send(Message("RMQ_SYS_TRACE_TOPIC", records.encode(), keys=[sent.msg_id, "page-trace"]))

    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        log_in(page, console_url, "admin", PASSWORD)
        page.goto(f"{console_url}/trace/?msg_id={sent.offset_msg_id}")
        page.get_by_test_id("full-trace").click()
        page.wait_for_url(f"{console_url}/trace/jobs/*/")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not page.get_by_test_id("trace-lane").count():
            time.sleep(0.3)  # the page follows the job (progress.js) and reloads when it is done
        lane = page.locator(f'[data-testid="trace-lane"][data-group="{group}"]')
        lane.wait_for()
        assert lane.locator('[data-type="client-consume-start"]').count() == 1
        consumed = lane.locator('[data-type="client-consumed"]')
        assert "cost 9 ms" in consumed.inner_text() and "SUCCESS" in consumed.inner_text()
        assert "client trace: 1 ok" in lane.inner_text()
        producer_side = page.locator('[data-testid="trace-lane"][data-group=""]')
        sent_step = producer_side.locator('[data-type="client-sent"]')
        assert "cost 3 ms" in sent_step.inner_text() and "producer group page-producers" in sent_step.inner_text()
        assert producer_side.locator('[data-type="stored"]').count() == 1
        shot(page, "45-trace-with-client-records")
    finally:
        context.close()
