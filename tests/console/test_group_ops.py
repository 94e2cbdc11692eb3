"""Consumer group list, nack and offset reset (preview and apply)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from broker_core.client import PullConsumer
from console.models import AuditEvent
from tests.console.test_groups_dlq import _make_dead_letter
from tests.integration.cluster import Cluster
from tests.integration.test_cluster import wait_until


def _produce(client: APIClient, topic: str, n: int, prefix: str = "m") -> list[dict[str, Any]]:
    resp = client.post(f"/api/v1/topics/{topic}/messages/", {"messages": [{"body": f"{prefix}{i}"} for i in range(n)]},
                       format="json")
    assert resp.status_code == 201, resp.json()
    return resp.json()["results"]


def _receive(client: APIClient, group: str, topic: str, want: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    wait_until(lambda: got.extend(client.post(f"/api/v1/consumer-groups/{group}/receive/", {
        "topic": topic, "max_messages": 16, "invisible_seconds": 60, "wait_seconds": 1}, format="json")
        .json()["messages"]) or len(got) >= want, timeout=30, what=f"{want} received messages")
    return got


def _committed(client: APIClient, group: str, topic: str) -> dict[int, int]:
    stats = client.get(f"/api/v1/consumer-groups/{group}/", {"topic": topic}).json()
    return {q["queue_id"]: q["consumer_offset"] for q in stats["queues"]}


def test_group_list_sources_lag_and_online(cluster: Cluster, operator: APIClient, viewer: APIClient, topic: str,
                                           unique: Callable[[str], str]) -> None:
    dead_group, acking_group = unique("listdlq"), unique("listack")
    _make_dead_letter(cluster, topic, dead_group)
    _produce(operator, topic, 2)
    got = _receive(operator, acking_group, topic, 2)
    operator.post(f"/api/v1/consumer-groups/{acking_group}/ack/",
                  {"topic": topic, "receipt_handles": [m["receipt_handle"] for m in got]}, format="json")

    resp = viewer.get("/api/v1/consumer-groups/")
    assert resp.status_code == 200, resp.json()
    rows = {r["group"]: r for r in resp.json()["results"]}
    assert resp.json()["count"] == len(rows)
    dead = rows[dead_group]
    assert "dlq_topic" in dead["sources"] and dead["has_dlq"] is True and dead["error"] is None
    acking = rows[acking_group]
    assert "console_audit" in acking["sources"] and acking["has_dlq"] is False
    assert topic in acking["topics"] and isinstance(acking["total_lag"], int)
    assert acking["online_count"] == len(acking["online"])

    found = viewer.get("/api/v1/consumer-groups/", {"search": acking_group.upper()}).json()["results"]
    assert [r["group"] for r in found] == [acking_group]


def test_a_group_that_only_committed_offsets_is_listed_from_the_broker(
        cluster: Cluster, viewer: APIClient, topic: str, unique: Callable[[str], str]) -> None:
    """No retry topic, no DLQ, nothing done through the console: the broker's own group table lists it."""
    group = unique("pullonly")
    assert group not in {r["group"] for r in viewer.get("/api/v1/consumer-groups/").json()["results"]}
    consumer = PullConsumer(group, cluster.namesrv).start()
    try:
        mq = consumer.fetch_queues(topic)[0]
        consumer.commit_offset(mq, 0)
    finally:
        consumer.shutdown()
    rows = {r["group"]: r for r in viewer.get("/api/v1/consumer-groups/").json()["results"]}
    assert rows[group]["sources"] == ["broker"] and rows[group]["has_dlq"] is False
    assert topic in rows[group]["topics"]


def test_nack_makes_messages_visible_again(operator: APIClient, viewer: APIClient, topic: str,
                                           unique: Callable[[str], str]) -> None:
    group = unique("nack")
    sent = _produce(operator, topic, 2)
    got = _receive(operator, group, topic, 2)
    handles = [m["receipt_handle"] for m in got]
    assert viewer.post(f"/api/v1/consumer-groups/{group}/nack/", {"topic": topic, "receipt_handles": handles},
                       format="json").status_code == 403

    started = time.monotonic()
    resp = operator.post(f"/api/v1/consumer-groups/{group}/nack/",
                         {"topic": topic, "receipt_handles": [*handles, "garbage"]}, format="json")
    assert resp.status_code == 200, resp.json()
    results = resp.json()["results"]
    assert [r["ok"] for r in results] == [True, True, False]
    assert all(r["new_receipt_handle"].startswith("broker-a!") for r in results[:2])
    assert results[2]["error"] == "malformed receipt handle" and results[2]["new_receipt_handle"] is None
    event = AuditEvent.objects.get(action="message.nack", target=f"{group}/{topic}")
    assert event.ok is False and event.username == "otto" and len(event.after["results"]) == 3

    again = _receive(operator, group, topic, 2)  # invisible for 60 s without the nack
    assert time.monotonic() - started < 20
    assert sorted(m["msg_id"] for m in again) == sorted(r["msg_id"] for r in sent)
    assert all(m["reconsume_times"] >= 1 for m in again)
    stale = operator.post(f"/api/v1/consumer-groups/{group}/nack/", {"topic": topic, "receipt_handles": handles[:1]},
                          format="json").json()["results"]
    assert stale[0]["ok"] is False and stale[0]["error"]

    assert operator.post(f"/api/v1/consumer-groups/{group}/nack/", {"topic": topic, "receipt_handles": []},
                         format="json").status_code == 400
    assert operator.post("/api/v1/consumer-groups/bad$/nack/", {"topic": topic, "receipt_handles": ["a!b"]},
                         format="json").status_code == 400


def test_reset_offset_preview_then_apply(operator: APIClient, viewer: APIClient, topic: str,
                                         unique: Callable[[str], str]) -> None:
    group = unique("reset")
    url = f"/api/v1/consumer-groups/{group}/reset-offset/"
    first = _produce(operator, topic, 6, "a")
    time.sleep(0.05)
    middle = dt.datetime.now(dt.UTC).isoformat()
    time.sleep(0.05)
    _produce(operator, topic, 4, "b")
    per_queue_first = {q: sum(1 for r in first if r["queue_id"] == q) for q in (0, 1)}

    preview = operator.post(url, {"topic": topic, "timestamp": "latest", "dry_run": True}, format="json")
    assert preview.status_code == 200, preview.json()
    body = preview.json()
    assert body["dry_run"] is True and body["target"] == {"timestamp_ms": -1}
    assert {q["queue_id"]: q["current_offset"] for q in body["queues"]} == {0: None, 1: None}
    assert all(q["target_offset"] == q["max_offset"] and q["replay"] == -q["max_offset"] for q in body["queues"])
    assert body["total_replay"] == -10
    assert _committed(viewer, group, topic) == {0: -1, 1: -1}  # the preview changed nothing

    exact = operator.post(url, {"topic": topic, "offsets": [{"broker": "broker-a", "queue_id": 0, "offset": 1}]},
                          format="json")
    assert exact.status_code == 200, exact.json()
    (row,) = exact.json()["queues"]
    assert row["queue_id"] == 0 and row["target_offset"] == 1 and row["applied_offset"] == 1
    assert _committed(viewer, group, topic)[0] == 1
    event = AuditEvent.objects.get(action="group.reset_offset", target=f"{group}/{topic}")
    assert event.ok and event.username == "otto"
    assert event.before["offsets"] == [{"broker": "broker-a", "queue_id": 0, "offset": None}]
    assert event.after["offsets"] == [{"broker": "broker-a", "queue_id": 0, "offset": 1}]

    by_time = operator.post(url, {"topic": topic, "timestamp": middle, "dry_run": True}, format="json").json()
    targets = {q["queue_id"]: q for q in by_time["queues"]}
    assert {q: targets[q]["target_offset"] for q in (0, 1)} == per_queue_first
    assert targets[0]["current_offset"] == 1 and targets[0]["replay"] == 1 - per_queue_first[0]
    assert _committed(viewer, group, topic)[0] == 1

    clamped = operator.post(url, {"topic": topic, "offsets": [{"broker": "broker-a", "queue_id": 1,
                                                               "offset": 10_000}], "dry_run": True}, format="json")
    assert clamped.json()["queues"][0]["target_offset"] == clamped.json()["queues"][0]["max_offset"]

    applied = operator.post(url, {"topic": topic, "timestamp": "earliest"}, format="json").json()
    assert applied["dry_run"] is False and all(q["applied_offset"] == 0 for q in applied["queues"])
    assert _committed(viewer, group, topic) == {0: 0, 1: 0}
    assert AuditEvent.objects.filter(action="group.reset_offset").count() == 2


def test_reset_offset_bad_input_and_roles(operator: APIClient, viewer: APIClient, topic: str) -> None:
    url = "/api/v1/consumer-groups/g1/reset-offset/"
    assert viewer.post(url, {"topic": topic, "timestamp": "latest", "dry_run": True},
                       format="json").status_code == 403

    def bad(data: dict[str, Any], status: int = 400) -> dict[str, Any]:
        resp = operator.post(url, data, format="json")
        assert resp.status_code == status, (data, resp.json())
        return resp.json()

    assert "exactly one" in bad({"topic": topic})["detail"]
    bad({"topic": topic, "timestamp": "latest", "offsets": [{"broker": "broker-a", "queue_id": 0, "offset": 0}]})
    assert "ISO 8601" in bad({"topic": topic, "timestamp": "yesterday"})["detail"]
    bad({"topic": topic, "offsets": []})
    bad({"topic": topic, "offsets": [{"broker": "broker-a", "queue_id": 0, "offset": -1}]})
    bad({"topic": topic, "offsets": [{"broker": "broker-a", "queue_id": 0, "offset": 1}] * 2})
    unknown = bad({"topic": topic, "offsets": [{"broker": "broker-a", "queue_id": 7, "offset": 0}]})
    assert unknown["error"] == "unknown_queue"
    bad({"topic": topic, "offsets": [{"broker": "broker-z", "queue_id": 0, "offset": 0}]})
    bad({"topic": "bad$", "timestamp": "latest"})
    bad({"topic": "NoSuchTopicReset", "timestamp": "latest", "dry_run": True}, 404)
    assert operator.post("/api/v1/consumer-groups/bad$/reset-offset/", {"topic": topic, "timestamp": "latest"},
                         format="json").status_code == 400
    assert not AuditEvent.objects.filter(action="group.reset_offset").exists()
