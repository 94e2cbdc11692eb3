"""The topic and group lists at many topics and groups, against a real broker of their own: paged, searched and
counted from the console's cached indexes (console.selectors.broker_cache), which see a topic the console
created at once and one created behind its back once the name server's DataVersion of the broker changed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from broker_core.client import AdminClient
from console import broker_client
from tests.integration.cluster import Cluster, wait_until

TOPICS, GROUPS = 5000, 240
UPDATE_AND_CREATE_TOPIC_LIST = 18  # RocketMQ 5's batch create (this broker's, 10k topics a request)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and broker holding TOPICS topics (Big00000..) and GROUPS subscription groups (BigG000..)."""
    c = Cluster(tmp_path_factory.mktemp("big-cluster")).add_brokers_registered({"broker-big": ""})
    try:
        addr = c.brokers["broker-big"].addr
        with AdminClient(c.namesrv) as admin:
            body = json.dumps({"topicConfigList": [
                {"topicName": f"Big{i:05d}", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
                for i in range(TOPICS)]}).encode()
            admin.request(addr, UPDATE_AND_CREATE_TOPIC_LIST, {}, body)
            for i in range(GROUPS):
                admin.update_subscription_group(addr, {"groupName": f"BigG{i:03d}"})
            wait_until(lambda: len([t for t in admin.topic_list() if t.startswith("Big")]) == TOPICS, timeout=60,
                       what="the topics' routes")
        yield c
    finally:
        broker_client.reset()
        c.close()


@pytest.fixture
def on_big(big: Cluster, settings) -> Cluster:  # type: ignore[no-untyped-def]
    settings.BROKER_CORE_NAMESRV = big.namesrv
    return big


def _page_client() -> Client:
    browser = Client()
    browser.force_login(User.objects.get(username="vera"))
    return browser


def test_topic_list_pages_and_searches_many_topics(on_big: Cluster, viewer: APIClient) -> None:
    first = viewer.get("/api/v1/topics/", {"search": "big", "page_size": 100}).json()
    assert (first["count"], first["pages"], first["page"]) == (TOPICS, TOPICS // 100, 1)
    assert [r["name"] for r in first["results"]] == [f"Big{i:05d}" for i in range(100)]
    last = viewer.get("/api/v1/topics/", {"search": "big", "page_size": 100, "page": TOPICS // 100}).json()
    assert [r["name"] for r in last["results"]][-1] == f"Big{TOPICS - 1:05d}"
    # a page past the end is the last one, as the page view wants it
    assert viewer.get("/api/v1/topics/", {"search": "big", "page_size": 100, "page": 10**6}).json()["page"] == 50
    found = viewer.get("/api/v1/topics/", {"search": "G0499", "page_size": 100}).json()
    assert [r["name"] for r in found["results"]] == [f"Big0499{d}" for d in range(10)] and found["count"] == 10
    normal = viewer.get("/api/v1/topics/", {"type": "normal", "page_size": 1}).json()["count"]
    system = viewer.get("/api/v1/topics/", {"type": "system", "page_size": 1}).json()["count"]
    everything = viewer.get("/api/v1/topics/", {"page_size": 1}).json()["count"]
    assert normal >= TOPICS and everything == normal + system  # no retry or DLQ topic on this broker yet
    html = _page_client().get("/topics/", {"search": "big", "page": 2}).content.decode()
    assert f"{TOPICS} topics, page 2 of {TOPICS // 200}" in html and "Big00200" in html and "Big00199" not in html


def test_topic_cache_sees_console_writes_at_once_and_other_writes_by_version(
        on_big: Cluster, admin: APIClient, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CONSOLE_BROKER_CACHE_S = 3600  # nothing expires during the test: only versions and writes count
    count = admin.get("/api/v1/topics/", {"page_size": 1}).json()["count"]
    with AdminClient(on_big.namesrv) as sdk:
        sdk.create_topic("BehindTheBack", 1, 1)
        wait_until(lambda: "BehindTheBack" in sdk.topic_list(), timeout=30, what="its route")
    # still the cached index: nobody told this console, and its entry is fresh
    assert admin.get("/api/v1/topics/", {"page_size": 1}).json()["count"] == count
    created = admin.post("/api/v1/topics/", {"name": "ThroughTheConsole", "read_queue_nums": 1,
                                             "write_queue_nums": 1, "perm": 6}, format="json")
    assert created.status_code == 201, created.json()
    # the console's own write expired the entry: the version check sees both topics
    names = {r["name"] for r in admin.get("/api/v1/topics/", {"search": "th"}).json()["results"]}
    assert {"BehindTheBack", "ThroughTheConsole"} <= names
    assert admin.get("/api/v1/topics/", {"page_size": 1}).json()["count"] == count + 2
    assert admin.delete("/api/v1/topics/ThroughTheConsole/").status_code == 204
    assert "ThroughTheConsole" not in {r["name"] for r in admin.get("/api/v1/topics/", {"search": "th"}).json()[
        "results"]}

    settings.CONSOLE_BROKER_CACHE_S = 0  # every read checks the version: a change behind the back is seen
    with AdminClient(on_big.namesrv) as sdk:
        sdk.delete_topic("BehindTheBack")
        wait_until(lambda: "BehindTheBack" not in sdk.topic_list(), timeout=30, what="its route gone")
    assert admin.get("/api/v1/topics/", {"page_size": 1}).json()["count"] == count


def test_group_list_pages_and_searches_many_groups(on_big: Cluster, viewer: APIClient) -> None:
    first = viewer.get("/api/v1/consumer-groups/", {"search": "bigg", "page_size": 100}).json()
    assert (first["count"], first["pages"], first["page"], first["page_size"]) == (GROUPS, 3, 1, 100)
    rows = first["results"]
    rows += viewer.get("/api/v1/consumer-groups/", {"search": "bigg", "page_size": 100, "page": 2}).json()["results"]
    third = viewer.get("/api/v1/consumer-groups/", {"search": "BIGG", "page_size": 100, "page": 3}).json()
    rows += third["results"]
    assert [r["group"] for r in rows] == [f"BigG{i:03d}" for i in range(GROUPS)] and len(third["results"]) == 40
    assert all(r["sources"] == ["broker"] and r["error"] is None and r["total_lag"] == 0 and r["online"] == []
               for r in rows)
    assert viewer.get("/api/v1/consumer-groups/", {"page_size": 0}).json()["error"] == "invalid_page"
    one = viewer.get("/api/v1/consumer-groups/", {"search": "bigg12"}).json()
    assert [r["group"] for r in one["results"]] == [f"BigG12{d}" for d in range(10)] and one["count"] == 10

    page = _page_client()
    html = page.get("/groups/", {"search": "bigg", "page": 3}).content.decode()
    assert f"{GROUPS} groups, page 3 of 3" in html and "BigG239" in html and "BigG199" not in html
    assert 'rel="prev"' in html and 'rel="next"' not in html


def test_group_list_sees_a_new_group(on_big: Cluster, viewer: APIClient) -> None:
    before = viewer.get("/api/v1/consumer-groups/", {"search": "bigg", "page_size": 1}).json()["count"]
    with AdminClient(on_big.namesrv) as sdk:
        sdk.update_subscription_group(on_big.brokers["broker-big"].addr, {"groupName": "BigGNew"})
    after = viewer.get("/api/v1/consumer-groups/", {"search": "biggnew"}).json()
    assert [r["group"] for r in after["results"]] == ["BigGNew"]
    assert viewer.get("/api/v1/consumer-groups/", {"search": "bigg", "page_size": 1}).json()["count"] == before + 1
    with AdminClient(on_big.namesrv) as sdk:
        sdk.delete_subscription_group(on_big.brokers["broker-big"].addr, "BigGNew")


def test_cluster_page_shows_one_page_of_routes(on_big: Cluster, viewer: APIClient) -> None:
    html = _page_client().get("/cluster/", {"search": "big", "page": 2}).content.decode()
    assert f"{TOPICS} topics, page 2 of {TOPICS // 100}" in html
    assert ">Big00100<" in html and ">Big00199<" in html and ">Big00099<" not in html and ">Big00200<" not in html
    assert "broker-big" in html and 'rel="next"' in html
