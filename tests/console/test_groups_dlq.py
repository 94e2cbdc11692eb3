"""Receive/ack over HTTP, consumer group stats, dead letters and resending them."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from broker_core.client import AdminClient, Message, Producer, SimpleConsumer
from console.models import AuditEvent
from tests.integration.cluster import Cluster
from tests.integration.test_cluster import wait_until


def test_receive_ack_and_group_stats(operator: APIClient, viewer: APIClient, topic: str,
                                     unique: Callable[[str], str]) -> None:
    group = unique("g")
    sent = operator.post(f"/api/v1/topics/{topic}/messages/", {"messages": [{"body": f"m{i}"} for i in range(3)]},
                         format="json").json()["results"]
    got: list[dict] = []
    wait_until(lambda: got.extend(operator.post(f"/api/v1/consumer-groups/{group}/receive/", {
        "topic": topic, "max_messages": 16, "invisible_seconds": 60, "wait_seconds": 1}, format="json")
        .json()["messages"]) or len(got) >= 3, timeout=30, what="three received messages")
    assert sorted(m["msg_id"] for m in got) == sorted(r["msg_id"] for r in sent)
    assert all(m["receipt_handle"].startswith("broker-a!") and "text" in m["body"] for m in got)

    handles = [m["receipt_handle"] for m in got]
    resp = operator.post(f"/api/v1/consumer-groups/{group}/ack/",
                         {"topic": topic, "receipt_handles": [*handles, handles[0], "garbage"]}, format="json")
    assert resp.status_code == 200, resp.json()
    results = resp.json()["results"]
    assert [r["ok"] for r in results] == [True, True, True, False, False]
    assert "already used" in results[3]["error"] and results[4]["error"] == "malformed receipt handle"
    event = AuditEvent.objects.get(action="message.ack", target=f"{group}/{topic}")
    assert event.ok is False and len(event.after["results"]) == 5

    stats = viewer.get(f"/api/v1/consumer-groups/{group}/", {"topic": topic})
    assert stats.status_code == 200, stats.json()
    assert stats.json()["total_lag"] == 0 and {q["queue_id"] for q in stats.json()["queues"]} == {0, 1}


def test_receive_ack_bad_input_and_roles(operator: APIClient, viewer: APIClient, topic: str) -> None:
    assert viewer.post("/api/v1/consumer-groups/g/receive/", {"topic": topic}, format="json").status_code == 403
    assert viewer.post("/api/v1/consumer-groups/g/ack/", {"topic": topic, "receipt_handles": ["x!y"]},
                       format="json").status_code == 403
    bad_group = operator.post("/api/v1/consumer-groups/bad$group/receive/", {"topic": topic}, format="json")
    assert bad_group.status_code == 400 and bad_group.json()["error"] == "invalid_group"
    assert operator.post("/api/v1/consumer-groups/g/receive/", {"topic": topic, "max_messages": 0},
                         format="json").status_code == 400
    assert operator.post("/api/v1/consumer-groups/g/receive/", {"topic": "NoSuchTopicR"},
                         format="json").status_code == 404
    assert operator.post("/api/v1/consumer-groups/g/ack/", {"topic": topic, "receipt_handles": []},
                         format="json").status_code == 400
    assert viewer.get("/api/v1/consumer-groups/bad$/").status_code == 400


def _make_dead_letter(cluster: Cluster, topic: str, group: str) -> str:
    """Produce one message and let a SimpleConsumer that never acks push it to the group's DLQ."""
    with Producer(group + "-p", cluster.namesrv) as producer:
        sent = producer.send(Message(topic, b"poison", keys="dead-1"))
    consumer = SimpleConsumer(group, cluster.namesrv, max_reconsume_times=0).start()
    consumer.subscribe(topic)
    with AdminClient(cluster.namesrv) as admin:
        wait_until(lambda: consumer.receive(16, invisible_duration=1.0, wait=1.0) is not None
                   and bool(admin.dead_letters(group)), timeout=30, what="the dead letter")
    consumer.shutdown()
    return sent.msg_id


def test_dead_letters_browse_and_resend(cluster: Cluster, operator: APIClient, viewer: APIClient, topic: str,
                                        unique: Callable[[str], str]) -> None:
    group = unique("dlqg")
    msg_id = _make_dead_letter(cluster, topic, group)

    seen = viewer.get(f"/api/v1/dlq/{group}/messages/")
    assert seen.status_code == 200, seen.json()
    (dead,) = seen.json()["results"]
    assert dead["msg_id"] == msg_id and dead["properties"]["DLQ_ORIGIN_TOPIC"] == topic and "body" not in dead
    assert operator.get(f"/api/v1/dlq/{group}/messages/").json()["results"][0]["body"] == {"text": "poison"}
    assert viewer.post(f"/api/v1/dlq/{group}/resend/", {"offset_msg_ids": [dead["offset_msg_id"]]},
                       format="json").status_code == 403

    resp = operator.post(f"/api/v1/dlq/{group}/resend/", {"offset_msg_ids": [dead["offset_msg_id"]]}, format="json")
    assert resp.status_code == 200, resp.json()
    (result,) = resp.json()["results"]
    assert result["ok"] and result["topic"] == topic and result["new_msg_id"]
    event = AuditEvent.objects.get(action="dlq.resend", target=group)
    assert event.ok and event.username == "otto"

    assert operator.post(f"/api/v1/dlq/{group}/resend/", {"offset_msg_ids": ["nothex"]},
                         format="json").status_code == 400
    assert viewer.get("/api/v1/dlq/no-dead-letters-here/messages/").json()["results"] == []
    assert viewer.get("/api/v1/dlq/bad$/messages/").status_code == 400
