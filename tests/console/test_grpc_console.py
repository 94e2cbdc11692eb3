"""The official RocketMQ 5 client (gRPC, its own process) and the console: what it sends is found by the REST API
(by key and by id), and what the REST API produces the official SimpleConsumer receives."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from broker_core.client import AdminClient
from tests.compat.grpc_cluster import create_group, official
from tests.integration.cluster import Cluster, wait_until


def test_official_client_and_rest_api_see_each_others_messages(
        cluster: Cluster, sdk_admin: AdminClient, operator: APIClient, unique: Callable[[str], str]) -> None:
    topic = unique("Grpc")
    sdk_admin.create_topic(topic, 2, 2)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what=f"route of {topic}")
    sent = official(cluster, "produce", mode="sync", messages=[
        {"topic": topic, "body": "from-grpc", "tag": "G", "keys": ["grpc-key"], "props": {"via": "grpc"}}])
    msg_id = sent["results"][0]["message_id"]
    found = operator.get("/api/v1/messages/", {"topic": topic, "key": "grpc-key"}).json()["results"]
    assert [(m["msg_id"], m["body"]["text"], m["tags"], m["properties"]["via"]) for m in found] == [
        (msg_id, "from-grpc", "G", "grpc")]
    detail = operator.get(f"/api/v1/messages/{msg_id}/", {"topic": topic})
    assert detail.status_code == 200 and detail.json()["body"] == {"text": "from-grpc"}

    resp = operator.post(f"/api/v1/topics/{topic}/messages/", {"messages": [
        {"body": f"from-rest-{i}", "keys": [f"rest-{i}"]} for i in range(3)]}, format="json")
    assert resp.status_code == 201, resp.json()
    group = unique("grpc-reader")
    create_group(cluster, group)
    got = official(cluster, "receive", group=group, topic=topic, expect=4)["messages"]
    assert sorted(m["body"] for m in got) == ["from-grpc", "from-rest-0", "from-rest-1", "from-rest-2"]
