"""Consume mode per group (message model, consume type, orderly or concurrently) from the online clients'
registrations with the real broker, in the group list and detail, over the API and the pages."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from broker_core.client import AdminClient, ConsumeStatus, PushConsumer
from tests.console.test_group_ops import _produce, _receive
from tests.integration.cluster import Cluster, wait_until


def _ok(msgs):  # type: ignore[no-untyped-def]
    return ConsumeStatus.CONSUME_SUCCESS


def _push(cluster: Cluster, group: str, topic: str, *, orderly: bool = False,
          model: str = "CLUSTERING") -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv, message_model=model, consume_from="FIRST")
    consumer.subscribe(topic, "a || b")
    consumer.register_message_listener(_ok, orderly=orderly)
    return consumer.start()


def test_consume_mode_from_client_registrations(cluster: Cluster, sdk_admin: AdminClient, operator: APIClient,
                                                viewer: APIClient, topic: str, unique: Callable[[str], str]) -> None:
    orderly_group, broadcast_group = unique("ordered"), unique("bcast")
    for group in (orderly_group, broadcast_group):  # make both groups known to the list (console audit)
        _produce(operator, topic, 1)
        got = _receive(operator, group, topic, 1)
        operator.post(f"/api/v1/consumer-groups/{group}/ack/",
                      {"topic": topic, "receipt_handles": [m["receipt_handle"] for m in got]}, format="json")
    before = viewer.get(f"/api/v1/consumer-groups/{orderly_group}/").json()
    assert before["clients"] == [] and before["consume_mode"]["label"] == "no client online"

    consumers = [_push(cluster, orderly_group, topic, orderly=True),
                 _push(cluster, broadcast_group, topic, model="BROADCASTING")]
    try:
        wait_until(lambda: all(sdk_admin.consumer_connections(g) for g in (orderly_group, broadcast_group)),
                   timeout=30, what="the consumers' registrations")
        detail = viewer.get(f"/api/v1/consumer-groups/{orderly_group}/", {"topic": topic}).json()
        assert detail["consume_mode"] == {"message_model": "CLUSTERING", "consume_type": "PUSH",
                                          "orderly": "orderly", "label": "CLUSTERING · PUSH · orderly"}
        (client,) = detail["clients"]
        assert client["subscriptions"] == {topic: "a || b"} and client["brokers"] == ["broker-a"]
        assert client["consume_from_where"] == "CONSUME_FROM_FIRST_OFFSET" and client["consume_orderly"] is True
        assert client["client_id"] in detail["online"]

        rows = {r["group"]: r for r in viewer.get("/api/v1/consumer-groups/").json()["results"]}
        assert rows[broadcast_group]["consume_mode"]["label"] == "BROADCASTING · PUSH · concurrently"
        assert rows[orderly_group]["consume_mode"]["orderly"] == "orderly"

        user = User.objects.create_user("cm-viewer", password="pw")
        user.groups.add(Group.objects.get(name="viewer"))
        page = Client()
        page.force_login(user)
        listing = page.get("/groups/", {"search": broadcast_group}).content.decode()
        assert "BROADCASTING · PUSH · concurrently" in listing
        html = page.get(f"/groups/{orderly_group}/").content.decode()
        assert "CLUSTERING · PUSH · orderly" in html and 'data-testid="clients"' in html
        assert client["client_id"] in html
    finally:
        for c in consumers:
            c.shutdown()
    wait_until(lambda: not sdk_admin.consumer_connections(orderly_group), timeout=30, what="unregistration")
