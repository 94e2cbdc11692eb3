"""A real RocketMQ client not written here, the Apache C++ core bundled in PyPI's ``rocketmq`` 0.4.4, against our
name server and broker, run as a separate process from its own virtualenv (``.venv-rocketmq``, made by
``make test``; the driver is ``cpp_client.py``). Our SDK is on the other side of every exchange."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from broker_core.client import (
    AdminClient,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
)
from broker_core.errors import ClientError
from broker_core.protocol import ResponseCode
from tests.compat.cpp_driver import body_of, cpp, one_broker_cluster, spec
from tests.integration.cluster import Cluster, read_topic, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from one_broker_cluster(tmp_path_factory, "cpp", "autoCreateTopicEnable=true\n")


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as a:
        yield a


@pytest.fixture(scope="module")
def producer(cluster: Cluster) -> Iterator[Producer]:
    p = Producer("sdk-producer", cluster.namesrv).start()
    yield p
    p.shutdown()


def sdk_pull_all(cluster: Cluster, topic: str) -> list[MessageExt]:
    """Every message of ``topic``, each queue read in full by our SDK; none while the name server has no route for
    it yet (a topic the client's send created from TBW102 is registered by the broker after the send is answered,
    and a oneway send is not answered at all)."""
    try:
        return read_topic(cluster.namesrv, topic, "sdk-reader")
    except ClientError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return []


def test_sync_send_routes_a_new_topic_and_an_existing_one(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("CppExisting", 2, 2)
    msgs = [spec("CppAuto", b"auto-%d" % i, keys=f"ka{i}") for i in range(5)]
    msgs += [spec("CppExisting", b"existing-%d" % i) for i in range(5)]
    results = cpp(cluster, "produce", group="cpp-pg", mode="sync", messages=msgs)["results"]
    assert [r["status"] for r in results] == ["OK"] * 10
    assert all(len(r["msg_id"]) == 32 for r in results)  # the client's unique id
    route = admin.topic_route("CppAuto")  # created from TBW102 by the first send
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a"]
    wait_until(lambda: len(sdk_pull_all(cluster, "CppAuto")) == 5, what="auto-created topic messages")
    existing = {m.msg_id: m for m in sdk_pull_all(cluster, "CppExisting")}
    assert sorted(m.body for m in existing.values()) == sorted(b"existing-%d" % i for i in range(5))
    for i, r in enumerate(results[5:]):  # the send result's offset is where the broker put it
        assert (existing[r["msg_id"]].body, existing[r["msg_id"]].queue_offset) == (b"existing-%d" % i, r["offset"])
    found, _ = admin.query_message("CppAuto", "ka3")
    assert [m.body for m in found] == [b"auto-3"]
    assert found[0].msg_id == results[3]["msg_id"]  # UNIQ_KEY the client set is what it was told


def test_oneway_and_orderly_send(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("CppOrder", 4, 4)
    cpp(cluster, "produce", group="cpp-pg", mode="oneway", messages=[spec("CppOneway", b"ow-%d" % i)
                                                                     for i in range(5)])
    wait_until(lambda: len(sdk_pull_all(cluster, "CppOneway")) == 5, what="oneway messages")
    msgs = [spec("CppOrder", b"%d-%02d" % (i % 2, i), arg=i % 2) for i in range(20)]
    results = cpp(cluster, "produce", group="cpp-pg", mode="orderly", messages=msgs)["results"]
    assert {r["status"] for r in results} == {"OK"}
    got = sdk_pull_all(cluster, "CppOrder")
    by_queue: dict[int, list[bytes]] = {}
    for m in got:
        by_queue.setdefault(m.queue_id, []).append(m.body)
    # the client's hashing selector: arg % queue count; each key's messages in one queue, in send order
    assert by_queue == {0: [b"0-%02d" % i for i in range(0, 20, 2)], 1: [b"1-%02d" % i for i in range(1, 20, 2)]}


DELAY_MS = {1: 1000, 2: 5000, 3: 10000}  # the broker's default messageDelayLevel: 1s 5s 10s ...


def test_delayed_send(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("CppDelay", 1, 1)
    sent_at = time.time() * 1000
    results = cpp(cluster, "produce", group="cpp-pg", mode="sync",
                  messages=[spec("CppDelay", b"level-%d" % level, delay=level, keys=f"delay-{level}", tags="D",
                                 props={"level": str(level)}) for level in DELAY_MS])["results"]
    early = sdk_pull_all(cluster, "CppDelay")
    checked_at = time.time() * 1000
    # held in SCHEDULE_TOPIC_XXXX: whatever is visible already had its delay pass (level 3's 10 s, at least,
    # normally has not)
    assert all(checked_at >= sent_at + DELAY_MS[int(m.body[-1:])] for m in early)
    wait_until(lambda: len(sdk_pull_all(cluster, "CppDelay")) == 3, timeout=60, what="delayed delivery")
    got = sorted(sdk_pull_all(cluster, "CppDelay"), key=lambda m: m.queue_offset)
    # each copy is put into the real topic only once its level's delay has passed, so in level order
    assert [m.body for m in got] == [b"level-%d" % level for level in DELAY_MS]
    for level, m, r in zip(DELAY_MS, got, results, strict=True):
        assert m.store_timestamp >= sent_at + DELAY_MS[level]
        # the copy keeps the client's unique id, keys, tags and properties
        assert (m.msg_id, m.keys, m.tags, m.properties["level"]) == (r["msg_id"], [f"delay-{level}"], "D", str(level))


def test_pull_from_zero_until_no_new_message(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("CppPull", 5, 5)
    for i in range(25):  # queues 0..3; queue 4 stays empty
        producer.send(Message("CppPull", b"p-%02d" % i, tags="T"), queue=MessageQueue("CppPull", "broker-a", i % 4))
    got = cpp(cluster, "pull", group="cpp-puller", topic="CppPull")
    assert got["queues"] == 5
    assert sorted(body_of(m) for m in got["messages"]) == sorted(b"p-%02d" % i for i in range(25))
    for q in range(4):  # each queue read from offset 0 in order
        assert [m["queue_offset"] for m in got["messages"] if m["queue_id"] == q] == list(range(7 if q == 0 else 6))
    # every queue, the empty one too, ended on NO_NEW_MSG: the broker answered the client's non-suspending pulls
    # at once instead of holding them until a timeout
    assert "BROKER_TIMEOUT" not in got["statuses"] and got["statuses"].count("NO_NEW_MSG") == 5


def test_push_with_tag_filter(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("CppTags", 2, 2)
    for i in range(30):
        producer.send(Message("CppTags", b"t-%02d" % i, tags=("TagA", "TagB", "TagC")[i % 3]))
    got = cpp(cluster, "push", group="cpp-tags", topic="CppTags", expression="TagA||TagB", expect=20, timeout=60,
              settle=2)["messages"]
    assert sorted(body_of(m) for m in got) == sorted(b"t-%02d" % i for i in range(30) if i % 3 != 2)
    assert {m["tags"] for m in got} == {"TagA", "TagB"}


def test_retry_through_send_back(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("CppRetry", 1, 1)
    producer.send(Message("CppRetry", b"again", keys="retry-1"))
    got = cpp(cluster, "push", group="cpp-retry", topic="CppRetry", expect=1, timeout=90,
              reconsume_later_once=True)["messages"]
    (m,) = got
    assert body_of(m) == b"again" and m["reconsume_times"] == 1  # came back through %RETRY%cpp-retry
    assert (m["keys"], m["topic"]) == ("retry-1", "CppRetry")  # the client restored the topic from RETRY_TOPIC


def test_offsets_are_committed_and_resumed(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("CppResume", 2, 2)
    for i in range(10):
        producer.send(Message("CppResume", b"first-%d" % i))
    first = cpp(cluster, "push", group="cpp-resume", topic="CppResume", expect=10, timeout=60)["messages"]
    assert sorted(body_of(m) for m in first) == sorted(b"first-%d" % i for i in range(10))
    wait_until(lambda: all(r["consumerOffset"] == r["maxOffset"]
                           for r in admin.consume_stats("cpp-resume", "CppResume")["offsetTable"]),
               what="the C++ consumer's committed offsets")
    for i in range(4):
        producer.send(Message("CppResume", b"second-%d" % i))
    second = cpp(cluster, "push", group="cpp-resume", topic="CppResume", expect=4, timeout=60,
                 settle=3)["messages"]
    assert sorted(body_of(m) for m in second) == sorted(b"second-%d" % i for i in range(4))  # nothing again


def test_100_messages_each_way(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("CppToSdk", 4, 4)
    admin.create_topic("SdkToCpp", 4, 4)
    props = ["color", "n"]  # bodies end in a byte 1..100 (no NUL: the binding reads bodies as C strings)
    msgs = [spec("CppToSdk", "c→s %d ünï".encode() + bytes([i + 1]), keys=f"k{i} alt{i}", tags=f"Tag{i % 3}",
                 props={"color": "red" if i % 2 else "blue", "n": str(i)}) for i in range(100)]
    assert {r["status"] for r in cpp(cluster, "produce", group="cpp-pg", mode="sync",
                                     messages=msgs)["results"]} == {"OK"}
    got = {m.properties["n"]: m for m in sdk_pull_all(cluster, "CppToSdk")}
    assert len(got) == 100
    for i, s in enumerate(msgs):
        m = got[str(i)]
        assert (m.body, m.keys, m.tags, m.properties["color"]) == (
            body_of(s), [f"k{i}", f"alt{i}"], f"Tag{i % 3}", s["props"]["color"])

    sent = {}
    for i in range(100):
        body = "s→c %d ünï".encode() + bytes([i + 1])
        props_i = {"color": "red" if i % 2 else "blue", "n": str(i)}
        sent[str(i)] = producer.send(Message("SdkToCpp", body, tags=f"Tag{i % 3}", keys=[f"k{i}", f"alt{i}"],
                                             properties=props_i))
    pulled = cpp(cluster, "pull", group="cpp-sdk-reader", topic="SdkToCpp", props=props)["messages"]
    assert len(pulled) == 100
    for m in pulled:
        i = int(m["props"]["n"])
        assert body_of(m) == "s→c %d ünï".encode() + bytes([i + 1])
        assert (m["keys"], m["tags"], m["props"]["color"]) == (f"k{i} alt{i}", f"Tag{i % 3}",
                                                               "red" if i % 2 else "blue")
        r = sent[str(i)]  # the client sees the unique id, queue and offset our producer was told
        assert (m["id"], m["queue_id"], m["queue_offset"]) == (r.msg_id, r.queue_id, r.queue_offset)
