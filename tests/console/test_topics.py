"""Topic endpoints: list, create, detail, update, delete, route, stats."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from broker_core.client import AdminClient, Message, Producer
from console.models import AuditEvent
from tests.integration.cluster import Cluster, wait_until


def test_list_has_types_and_filters(viewer: APIClient, topic: str) -> None:
    resp = viewer.get("/api/v1/topics/")
    assert resp.status_code == 200
    rows = {r["name"]: r["type"] for r in resp.json()["results"]}
    assert rows[topic] == "normal"
    assert rows.get("TBW102", "system") == "system"
    found = viewer.get("/api/v1/topics/", {"search": topic.lower()}).json()["results"]
    assert [r["name"] for r in found] == [topic]
    assert all(r["type"] == "system" for r in viewer.get("/api/v1/topics/", {"type": "system"}).json()["results"])
    bad = viewer.get("/api/v1/topics/", {"type": "weird"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_type"


def test_create_detail_update_delete_are_audited(admin: APIClient, unique: Callable[[str], str]) -> None:
    name = unique("Created")
    resp = admin.post("/api/v1/topics/", {"name": name, "read_queue_nums": 3, "write_queue_nums": 3, "perm": 6},
                      format="json")
    assert resp.status_code == 201, resp.json()
    assert resp.json()["brokers"] == [{"broker_name": "broker-a", "read_queue_nums": 3, "write_queue_nums": 3,
                                       "perm": 6}]
    again = admin.post("/api/v1/topics/", {"name": name}, format="json")
    assert again.status_code == 409 and again.json()["error"] == "topic_exists"

    detail = admin.get(f"/api/v1/topics/{name}/").json()
    assert detail["type"] == "normal" and detail["brokers"][0]["read_queue_nums"] == 3

    patched = admin.patch(f"/api/v1/topics/{name}/", {"read_queue_nums": 5, "write_queue_nums": 5}, format="json")
    assert patched.status_code == 200, patched.json()
    assert admin.get(f"/api/v1/topics/{name}/").json()["brokers"][0]["write_queue_nums"] == 5

    route = admin.get(f"/api/v1/topics/{name}/route/").json()
    assert route["queueDatas"][0]["brokerName"] == "broker-a"
    stats = admin.get(f"/api/v1/topics/{name}/stats/").json()
    assert sorted(q["queue_id"] for q in stats["queues"]) == [0, 1, 2, 3, 4]

    assert admin.delete(f"/api/v1/topics/{name}/").status_code == 204
    assert admin.get(f"/api/v1/topics/{name}/").status_code == 404

    events = list(AuditEvent.objects.filter(target=name).order_by("id"))
    assert [e.action for e in events] == ["topic.create", "topic.update", "topic.delete"]
    assert all(e.ok and e.username == "ada" for e in events)
    assert events[1].before["brokers"][0]["read_queue_nums"] == 3
    assert events[1].after["brokers"][0]["read_queue_nums"] == 5


def test_bad_topic_input(admin: APIClient) -> None:
    resp = admin.post("/api/v1/topics/", {"name": "no spaces!"}, format="json")
    assert resp.status_code == 400
    body = resp.json()
    assert body["error"] == "invalid" and "name" in body["fields"] and "may only contain" in body["detail"]
    assert admin.post("/api/v1/topics/", {"name": "x" * 128}, format="json").status_code == 400
    assert admin.post("/api/v1/topics/", {"name": "Ok", "perm": 7}, format="json").status_code == 400
    assert admin.get("/api/v1/topics/bad$name/").json()["error"] == "invalid_topic"
    assert admin.patch("/api/v1/topics/NoSuchTopic/", {"perm": 4}, format="json").status_code == 404
    assert admin.patch("/api/v1/topics/NoSuchTopic/", {}, format="json").status_code == 400
    assert admin.delete("/api/v1/topics/NoSuchTopic/").status_code == 404
    missing = admin.get("/api/v1/topics/NoSuchTopic/route/")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_auto_created_topics_are_marked(cluster: Cluster, sdk_admin: AdminClient, viewer: APIClient,
                                        unique: Callable[[str], str]) -> None:
    """A topic a producer's first send created (autoCreateTopicEnable, through TBW102) is marked in the API and
    the topic list page; one an operator created is not."""
    made, auto = unique("Made"), unique("Auto")
    sdk_admin.create_topic(made, 1, 1)
    with Producer(unique("autop"), cluster.namesrv) as producer:
        producer.send(Message(auto, b"first send creates me"))
    wait_until(lambda: {made, auto} <= set(sdk_admin.topic_list()), timeout=30, what="both routes")
    rows = {r["name"]: r for r in viewer.get("/api/v1/topics/", {"search": "-"}).json()["results"]}
    assert rows[auto]["auto_created"] is True and rows[made]["auto_created"] is False
    browser = Client()
    browser.force_login(User.objects.get(username="vera"))  # the viewer, on the pages
    page = browser.get("/topics/", {"search": auto})
    assert page.status_code == 200 and b'data-testid="auto-created"' in page.content
    assert b'data-testid="auto-created"' not in browser.get("/topics/", {"search": made}).content


def test_list_is_paged(cluster: Cluster, sdk_admin: AdminClient, viewer: APIClient,
                       unique: Callable[[str], str]) -> None:
    """``page``/``page_size`` cut the matches; ``count`` and ``pages`` describe them all; the page view pages too."""
    prefix = unique("Paged")
    names = [f"{prefix}-{i}" for i in range(3)]
    for name in names:
        sdk_admin.create_topic(name, 1, 1)
    wait_until(lambda: set(names) <= set(sdk_admin.topic_list()), timeout=30, what="the routes")
    first = viewer.get("/api/v1/topics/", {"search": prefix, "page_size": 2}).json()
    assert (first["count"], first["pages"], first["page"], first["page_size"]) == (3, 2, 1, 2)
    second = viewer.get("/api/v1/topics/", {"search": prefix, "page_size": 2, "page": 2}).json()
    assert [r["name"] for r in first["results"] + second["results"]] == sorted(names)
    assert viewer.get("/api/v1/topics/", {"page_size": 0}).json()["error"] == "invalid_page"
    assert viewer.get("/api/v1/topics/", {"page": "x"}).status_code == 400
    browser = Client()
    browser.force_login(User.objects.get(username="vera"))
    assert b"3 topics" in browser.get("/topics/", {"search": prefix}).content
