"""The official RocketMQ 5 Python client's SimpleConsumer and PushConsumer over our brokers' gRPC endpoint (a
separate process, ``grpc_client.py``): receive and ack, change invisible duration, redelivery after the
invisible time, the DLQ after the maximum attempts, a concurrent PushConsumer whose listener fails once; and
the state gRPC consumers share with our SDK's consumers of the same group (offsets, DLQ, receipt handles)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.client import SimpleConsumer as SdkSimpleConsumer
from tests.compat.grpc_cluster import create_group, grpc_cluster, official
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = grpc_cluster(tmp_path_factory.mktemp("grpc-consumer"))
    try:
        yield c
    finally:
        c.close()


def test_sdk_sends_official_simple_consumer_receives_and_acks(cluster: Cluster, admin: AdminClient,
                                                              producer: Producer) -> None:
    admin.create_topic("GRecv", 2, 2, brokers=["broker-a"])
    create_group(cluster, "g-recv")
    sent = [producer.send(Message("GRecv", f"sdk-{i}".encode(), tags="T", keys=[f"key{i}"],
                                  properties={"origin": "sdk"})) for i in range(6)]
    got = official(cluster, "receive", group="g-recv", topic="GRecv", expect=6)["messages"]
    assert sorted(m["body"] for m in got) == [f"sdk-{i}" for i in range(6)]
    assert sorted(m["id"] for m in got) == sorted(r.msg_id for r in sent)
    first = next(m for m in got if m["body"] == "sdk-0")
    assert (first["tag"], first["keys"], first["props"], first["attempt"]) == ("T", ["key0"], {"origin": "sdk"}, 1)
    # acked: the group's committed offsets moved to the end, where our SDK's consumers of the group start
    stats = admin.consume_stats("g-recv", "GRecv")
    assert sum(q["consumerOffset"] for q in stats["offsetTable"]) == 6
    again = official(cluster, "receive", group="g-recv", topic="GRecv", expect=1, within=3)["messages"]
    assert again == []


def test_change_invisible_duration_and_redelivery_after_the_invisible_time(cluster: Cluster, admin: AdminClient,
                                                                           producer: Producer) -> None:
    admin.create_topic("GInvis", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-invis")
    producer.send(Message("GInvis", b"comes-back"))
    out = official(cluster, "redeliver", group="g-invis", topic="GInvis", invisible=2)
    assert out["again"]["id"] == out["first"]["id"]
    assert (out["first"]["attempt"], out["again"]["attempt"]) == (1, 2)
    assert out["again"]["received_ms"] - out["first"]["received_ms"] >= 2000  # not before its invisible time
    producer.send(Message("GInvis", b"changed"))
    out = official(cluster, "redeliver", group="g-invis", topic="GInvis", invisible=60, change_to=1)
    assert out["changed_handle_differs"]  # ChangeInvisibleDuration answered a new receipt handle
    assert out["again"]["body"] == "changed" and out["again"]["attempt"] == 2  # back after 1 s, not 60
    assert out["again"]["received_ms"] < out["first"]["received_ms"] + 60_000
    assert official(cluster, "receive", group="g-invis", topic="GInvis", expect=1, within=3)["messages"] == []


def test_dead_letter_after_the_maximum_attempts_shared_with_the_sdk(cluster: Cluster, admin: AdminClient,
                                                                    producer: Producer) -> None:
    admin.create_topic("GDlq", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-dlq", retry_max_times=2)  # 3 deliveries, then %DLQ%g-dlq
    sent = producer.send(Message("GDlq", b"poison"))
    got = official(cluster, "exhaust", group="g-dlq", topic="GDlq", invisible=1, quiet=5)["messages"]
    assert [m["attempt"] for m in got] == [1, 2, 3]
    wait_until(lambda: len(admin.dead_letters("g-dlq")) == 1, what="the dead letter")
    dead = admin.dead_letters("g-dlq")[0]
    assert (dead.body, dead.msg_id) == (b"poison", sent.msg_id)
    # our SDK's receive/ack consumer of the same group sees the same state: nothing left to receive
    sdk = SdkSimpleConsumer("g-dlq", cluster.namesrv).start()
    try:
        sdk.subscribe("GDlq")
        assert sdk.receive(16, 10, wait=1) == []
    finally:
        sdk.shutdown()


def test_receipt_handles_are_shared_with_the_sdk_consumers(cluster: Cluster, admin: AdminClient,
                                                           producer: Producer) -> None:
    admin.create_topic("GShare", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-share")
    producer.send(Message("GShare", b"one"))
    producer.send(Message("GShare", b"two"))
    sdk = SdkSimpleConsumer("g-share", cluster.namesrv).start()
    try:
        sdk.subscribe("GShare")
        held = sdk.receive(1, 60, wait=5)  # in flight for our SDK: the official client must not get it
        assert [m.body for m in held] == [b"one"]
        got = official(cluster, "receive", group="g-share", topic="GShare", expect=2, within=4)["messages"]
        assert [m["body"] for m in got] == ["two"]
        sdk.ack(held[0])
    finally:
        sdk.shutdown()
    stats = admin.consume_stats("g-share", "GShare")
    assert sum(q["consumerOffset"] for q in stats["offsetTable"]) == 2


def test_push_consumer_listener_fails_once_then_succeeds(cluster: Cluster, admin: AdminClient,
                                                         producer: Producer) -> None:
    admin.create_topic("GPush", 2, 2)  # both brokers: the consumer receives from both
    create_group(cluster, "g-push")
    wait_until(lambda: len(admin.topic_route("GPush")["brokerDatas"]) == 2, what="GPush on both brokers")
    for i in range(8):
        producer.send(Message("GPush", f"p-{i}".encode()))
    got = official(cluster, "push", group="g-push", topic="GPush", expect=8, fail_first=True, within=120)
    bodies = [m["body"] for m in got["messages"]]
    assert sorted(bodies) == [f"p-{i}" for i in range(8)]  # each failed once (nacked), then redelivered
    assert {m["attempt"] for m in got["messages"]} == {2}
