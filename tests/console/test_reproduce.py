"""Re-producing a message from its detail page: the topic's send form pre-filled with body, tags, keys and user
properties (operator+), and the send audited as ``message.reproduce`` naming the source message."""

from __future__ import annotations

import base64
from collections.abc import Callable

from django.contrib.auth.models import Group, User
from django.test import Client

from broker_core.client import AdminClient, Message, Producer
from console.models import AuditEvent
from tests.console.test_groups_dlq import _make_dead_letter
from tests.integration.cluster import Cluster


def _page(role: str) -> Client:
    user = User.objects.create_user(f"rp-{role}", password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def test_reproduce_prefills_the_send_form_and_is_audited(cluster: Cluster, sdk_admin: AdminClient,
                                                         topic: str) -> None:
    with Producer("rp-producer", cluster.namesrv) as producer:
        sent = producer.send(Message(topic, b'{"order": 7, "note": "<b>x</b>"}', tags="created",
                                     keys=["order-7", "cust-3"], properties={"color": "blue", "tenant": "acme"}))
    operator = _page("operator")
    detail = operator.get(f"/messages/{sent.offset_msg_id}/").content.decode()
    assert f"/topics/{topic}/send/?from={sent.offset_msg_id}" in detail

    form = operator.get(f"/topics/{topic}/send/", {"from": sent.offset_msg_id})
    assert form.status_code == 200
    html = form.content.decode()
    assert 'data-testid="reproducing"' in html
    assert "{&quot;order&quot;: 7, &quot;note&quot;: &quot;&lt;b&gt;x&lt;/b&gt;&quot;}" in html  # escaped
    assert 'value="created"' in html and 'value="order-7 cust-3"' in html
    assert "color=blue\ntenant=acme" in html and "UNIQ_KEY" not in html.split('data-testid="send-form"')[1]
    assert f'name="reproduced_from" value="{sent.offset_msg_id}"' in html

    resp = operator.post(f"/topics/{topic}/send/", {
        "body": '{"order": 7, "note": "<b>x</b>"}', "body_encoding": "utf-8", "tags": "created",
        "keys": "order-7 cust-3", "properties": "color=blue\ntenant=acme", "reproduced_from": sent.offset_msg_id})
    assert resp.status_code == 201, resp.content.decode()[-2000:]
    copy_id = resp.content.decode().split('data-testid="sent-offset-id">')[1].split("<")[0]
    copy = sdk_admin.view_message(copy_id)
    assert copy.body == b'{"order": 7, "note": "<b>x</b>"}' and copy.tags == "created"
    assert copy.keys == ["order-7", "cust-3"] and copy.properties["color"] == "blue"
    assert copy.msg_id != sent.msg_id
    event = AuditEvent.objects.get(action="message.reproduce")
    assert event.target == topic and event.before == {"from": sent.offset_msg_id} and event.username == "rp-operator"
    assert event.after["msg_ids"] == [copy.msg_id]


def test_reproduce_binary_and_dead_letter(cluster: Cluster, sdk_admin: AdminClient, topic: str,
                                          unique: Callable[[str], str]) -> None:
    with Producer("rp-producer2", cluster.namesrv) as producer:
        sent = producer.send(Message(topic, b"\xff\x00\x01"))
    html = _page("operator").get(f"/topics/{topic}/send/", {"from": sent.offset_msg_id}).content.decode()
    assert base64.b64encode(b"\xff\x00\x01").decode() in html and '<option value="base64" selected>' in html

    group = unique("rpg")
    _make_dead_letter(cluster, topic, group)
    (dead,) = [m for m in sdk_admin.dead_letters(group) if m.body == b"poison"]
    client = _page("admin")
    detail = client.get(f"/messages/{dead.offset_msg_id}/").content.decode()
    assert f"/topics/{topic}/send/?from={dead.offset_msg_id}" in detail  # back to the original topic
    form = client.get(f"/topics/{topic}/send/", {"from": dead.offset_msg_id}).content.decode()
    assert "poison" in form and "DLQ_ORIGIN_TOPIC" not in form.split('data-testid="send-form"')[1]


def test_reproduce_needs_operator_and_valid_input(topic: str) -> None:
    viewer = _page("viewer")
    assert viewer.get(f"/topics/{topic}/send/", {"from": "0" * 32}).status_code == 403
    operator = _page("operator")
    assert operator.get(f"/topics/{topic}/send/", {"from": "nothex"}).status_code == 400
    bad = operator.post(f"/topics/{topic}/send/", {"body": "x", "body_encoding": "utf-8", "properties": "UNIQ_KEY=1"})
    assert bad.status_code == 400 and "set by the broker" in bad.content.decode()
    bad = operator.post(f"/topics/{topic}/send/", {"body": "x", "body_encoding": "utf-8", "properties": "novalue"})
    assert bad.status_code == 400 and "name=value" in bad.content.decode()
    assert not AuditEvent.objects.filter(action__startswith="message.").exists()
