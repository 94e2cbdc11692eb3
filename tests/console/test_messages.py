"""Produce over HTTP, then find the messages by offset id, unique id and key."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from rest_framework.test import APIClient

from console.api.serializers import OutgoingMessageSerializer
from console.models import AuditEvent
from console.services.messages import MAX_BODY_BYTES


def produce(client: APIClient, topic: str, *messages: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/topics/{topic}/messages/", {"messages": list(messages)}, format="json")


def test_produce_then_look_up_by_id_and_key(operator: APIClient, topic: str) -> None:
    resp = produce(operator, topic,
                   {"body": "hello <script>", "tags": "created", "keys": ["order-1"], "properties": {"region": "eu"}},
                   {"body": base64.b64encode(b"\xff\x00binary").decode(), "body_encoding": "base64",
                    "keys": ["order-1"]})
    assert resp.status_code == 201, resp.json()
    first, second = resp.json()["results"]
    assert len(first["msg_id"]) == 32 and len(first["offset_msg_id"]) == 32 and first["queue_id"] in (0, 1)

    by_offset = operator.get(f"/api/v1/messages/{first['offset_msg_id']}/")
    assert by_offset.status_code == 200, by_offset.json()
    msg = by_offset.json()
    assert msg["msg_id"] == first["msg_id"] and msg["topic"] == topic and msg["tags"] == "created"
    # every stored property but tags, keys and the id: the broker adds CLUSTER, as RocketMQ's does
    assert msg["keys"] == ["order-1"] and msg["properties"] == {"region": "eu", "CLUSTER": "DefaultCluster"}
    assert msg["body"] == {"text": "hello <script>"} and msg["store_timestamp"].endswith("+00:00")

    by_unique = operator.get(f"/api/v1/messages/{second['msg_id'].lower()}/", {"topic": topic}).json()
    assert by_unique["body"] == {"base64": base64.b64encode(b"\xff\x00binary").decode()}

    found = operator.get("/api/v1/messages/", {"topic": topic, "key": "order-1"}).json()
    assert sorted(m["msg_id"] for m in found["results"]) == sorted([first["msg_id"], second["msg_id"]])
    assert found["truncated"] is False and found["next"] is None
    capped = operator.get("/api/v1/messages/", {"topic": topic, "key": "order-1", "limit": 1}).json()
    assert len(capped["results"]) == 1 and capped["truncated"] is True
    assert operator.get("/api/v1/messages/", {"topic": topic, "key": "nope"}).json()["results"] == []

    (event,) = AuditEvent.objects.filter(action="message.produce", target=topic)
    assert event.ok and event.username == "otto" and event.after["msg_ids"] == [first["msg_id"], second["msg_id"]]


def test_viewer_sees_metadata_but_no_body(operator: APIClient, viewer: APIClient, topic: str) -> None:
    (sent,) = produce(operator, topic, {"body": "secret", "keys": ["k"]}).json()["results"]
    msg = viewer.get(f"/api/v1/messages/{sent['offset_msg_id']}/").json()
    assert msg["msg_id"] == sent["msg_id"] and msg["body_size"] == 6 and "body" not in msg
    assert all("body" not in m for m in viewer.get("/api/v1/messages/", {"topic": topic, "key": "k"}).json()["results"])
    assert produce(viewer, topic, {"body": "x"}).status_code == 403


def test_produce_bad_input(operator: APIClient, topic: str) -> None:
    bad64 = produce(operator, topic, {"body": "***not base64***", "body_encoding": "base64"})
    assert bad64.status_code == 400 and "base64" in bad64.json()["detail"]
    url = f"/api/v1/topics/{topic}/messages/"  # raw JSON: "\ud800" escapes a lone surrogate, which is not text
    surrogate = operator.post(url, '{"messages": [{"body": "ok \\ud800 not"}]}', content_type="application/json")
    assert surrogate.status_code == 400 and "U+D800 at character 3" in surrogate.json()["detail"]
    bad64_text = operator.post(url, '{"messages": [{"body": "\\ud800", "body_encoding": "base64"}]}',
                               content_type="application/json")
    assert bad64_text.status_code == 400 and "base64" in bad64_text.json()["detail"]
    big = produce(operator, topic, {"body": "x" * (MAX_BODY_BYTES + 1)})
    assert big.status_code == 400 and "limit" in big.json()["detail"]
    assert produce(operator, topic).status_code == 400  # no messages
    assert produce(operator, topic, {"body": ""}).status_code == 400
    assert produce(operator, topic, {"body": "x", "delay_level": 19}).status_code == 400
    invalid = produce(operator, "bad$topic", {"body": "x"})
    assert invalid.status_code == 400 and invalid.json()["error"] == "invalid_topic"
    missing = produce(operator, "NoSuchTopicHere", {"body": "x"})
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert not AuditEvent.objects.get(action="message.produce", target="NoSuchTopicHere").ok


def test_message_lookup_bad_input(operator: APIClient, topic: str) -> None:
    malformed = operator.get("/api/v1/messages/xyz/")
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_message_id"
    assert operator.get("/api/v1/messages/" + "G" * 32 + "/").status_code == 400
    (sent,) = produce(operator, topic, {"body": "x"}).json()["results"]
    past_end = sent["offset_msg_id"][:16] + "00000000FFFFFFFF"  # the same broker, an offset never written
    assert operator.get(f"/api/v1/messages/{past_end}/").status_code == 404
    unknown_host = "0A000001000004D2" + "0" * 16  # 10.0.0.1:1234 is no broker of ours: never contacted
    resp = operator.get(f"/api/v1/messages/{unknown_host}/")
    assert resp.status_code == 404 and "no known broker" in resp.json()["detail"]
    assert operator.get(f"/api/v1/messages/{'A' * 32}/", {"topic": topic}).status_code == 404
    assert operator.get("/api/v1/messages/", {"topic": topic}).status_code == 400  # key required
    assert operator.get("/api/v1/messages/", {"topic": "bad$", "key": "k"}).status_code == 400
    assert operator.get("/api/v1/messages/", {"topic": topic, "key": "k", "begin": "yesterday"}).status_code == 400


@pytest.mark.parametrize("body", ["plain", "ünïcode ✓", " spaces kept "])
def test_the_fast_path_for_plain_bodies_equals_the_full_validation(body: str) -> None:
    fast = OutgoingMessageSerializer(data={"body": body})
    full = OutgoingMessageSerializer(data={"body": body, "body_encoding": "utf-8", "delay_level": 0, "keys": []})
    assert fast.is_valid() and full.is_valid(), (fast.errors, full.errors)
    assert fast.validated_data == full.validated_data


@pytest.mark.parametrize("data", [{"body": ""}, {"body": 5}, {"body": "x", "body_encoding": "base64"}, {"body": None}])
def test_other_bodies_take_drf_s_full_path(data: dict) -> None:  # type: ignore[type-arg]
    fast = OutgoingMessageSerializer(data=data)
    full = OutgoingMessageSerializer(data={**data, "delay_level": 0})
    assert fast.is_valid() == full.is_valid() and fast.errors == full.errors


def test_a_plain_body_refused_by_validate_gives_drf_s_errors_nested_as_drf_nests_them() -> None:
    from console.api.serializers import ProduceSerializer
    from console.services.messages import MAX_BODY_BYTES

    big = "x" * (MAX_BODY_BYTES + 1)
    fast = ProduceSerializer(data={"messages": [{"body": "ok"}, {"body": big}]})
    full = ProduceSerializer(data={"messages": [{"body": "ok", "keys": []}, {"body": big, "keys": []}]})
    assert not fast.is_valid() and not full.is_valid()
    assert fast.errors == full.errors and "body" in str(fast.errors)


PRODUCE_INPUTS: list[Any] = [
    {"messages": [{"body": "one"}]},
    {"messages": [{"body": "ünïcode ✓", "body_encoding": "utf-8"}, {"body": " two "}], "ignored": 1},
    {"messages": [{"body": "x"}] * 1000},
    {"messages": [{"body": "x"}] * 1001},
    {"messages": []},
    {"messages": [{"body": "plain"}, {"body": "tagged", "tags": "t"}]},
    {"messages": [{"body": "\ud800 lone surrogate"}]},
    {"messages": [{"body": "x" * (MAX_BODY_BYTES + 1)}]},
    {"messages": [{"body": ""}]},
    {"messages": [{"body": "aGk=", "body_encoding": "base64"}]},
    {"messages": {"body": "not a list"}},
    {"messages": "text"},
    {},
    [{"body": "x"}],
]


@pytest.mark.parametrize("data", PRODUCE_INPUTS, ids=range(len(PRODUCE_INPUTS)))
def test_plain_produce_gives_what_the_produce_serializer_gives_or_leaves_it_to_it(data: Any) -> None:
    from console.api.serializers import ProduceSerializer, plain_produce

    fast = plain_produce(data)
    full = ProduceSerializer(data=data)
    if fast is None:  # the view validates it with the serializer: DRF's answer, errors included
        return
    assert full.is_valid(), full.errors
    assert fast == list(full.validated_data["messages"])


def test_plain_produce_takes_the_commonest_requests_only() -> None:
    from console.api.serializers import plain_produce

    taken = [i for i, data in enumerate(PRODUCE_INPUTS) if plain_produce(data) is not None]
    assert taken == [0, 1, 2]
