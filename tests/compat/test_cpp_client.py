"""A real RocketMQ client not written here, the Apache C++ core bundled in PyPI's ``rocketmq`` 0.4.4, against our
name server and broker, run as a separate process from its own virtualenv (``.venv-rocketmq``, made by
``make test``; the driver is ``cpp_client.py``). Our SDK is on the other side of every exchange."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, MessageExt, Producer, PullConsumer, PullStatus
from tests.conftest import ROOT
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

VENV_PYTHON = ROOT / ".venv-rocketmq" / "bin" / "python"
DRIVER = Path(__file__).with_name("cpp_client.py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not VENV_PYTHON.exists():
        pytest.fail(f"{VENV_PYTHON} is missing: run `make .venv-rocketmq/.installed` (make test does)")
    c = Cluster(tmp_path_factory.mktemp("cpp"))
    try:
        c.add_brokers_registered({"broker-a": "autoCreateTopicEnable=true\n"})
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as a:
        yield a


@pytest.fixture(scope="module")
def producer(cluster: Cluster) -> Iterator[Producer]:
    p = Producer("sdk-producer", cluster.namesrv).start()
    yield p
    p.shutdown()


def cpp(cluster: Cluster, op: str, timeout: float = 120, **cmd: Any) -> dict[str, Any]:
    """Run one driver command in the C++ client's virtualenv; its JSON answer."""
    cmd = {"op": op, "namesrv": cluster.namesrv, **cmd}
    proc = subprocess.run([str(VENV_PYTHON), str(DRIVER), json.dumps(cmd)], capture_output=True, timeout=timeout,
                          cwd=cluster.tmp)
    assert proc.returncode == 0, f"C++ client {op} failed: {proc.stderr.decode()[-3000:]}"
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def spec(topic: str, body: bytes, **kw: Any) -> dict[str, Any]:
    return {"topic": topic, "body": base64.b64encode(body).decode(), **kw}


def body_of(m: dict[str, Any]) -> bytes:
    return base64.b64decode(m["body"])


def sdk_pull_all(cluster: Cluster, topic: str) -> list[MessageExt]:
    """Every message of ``topic``, each queue pulled from 0 by our SDK."""
    pc = PullConsumer("sdk-reader", cluster.namesrv).start()
    try:
        out: list[MessageExt] = []
        for mq in pc.fetch_queues(topic):
            offset = 0
            while True:
                res = pc.pull(mq, offset, 32)
                if res.status != PullStatus.FOUND:
                    break
                out += res.messages
                offset = res.next_begin_offset
        return out
    finally:
        pc.shutdown()


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
    assert sorted(m.body for m in sdk_pull_all(cluster, "CppExisting")) == sorted(b"existing-%d" % i
                                                                                   for i in range(5))
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


def test_delayed_send(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("CppDelay", 1, 1)
    sent_at = time.time() * 1000
    cpp(cluster, "produce", group="cpp-pg", mode="sync", messages=[spec("CppDelay", b"later", delay=2)])  # 5 s
    assert sdk_pull_all(cluster, "CppDelay") == []  # held in SCHEDULE_TOPIC_XXXX, not visible yet
    wait_until(lambda: len(sdk_pull_all(cluster, "CppDelay")) == 1, timeout=60, what="delayed delivery")
    (m,) = sdk_pull_all(cluster, "CppDelay")
    assert m.body == b"later" and m.store_timestamp >= sent_at + 5000


def test_pull_from_zero_until_no_new_message(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("CppPull", 4, 4)
    for i in range(25):
        producer.send(Message("CppPull", b"p-%02d" % i, tags="T"))
    got = cpp(cluster, "pull", group="cpp-puller", topic="CppPull")
    assert got["queues"] == 4
    assert sorted(body_of(m) for m in got["messages"]) == sorted(b"p-%02d" % i for i in range(25))
    # every queue ended on NO_NEW_MSG: the broker did not hold the non-suspending pulls until a timeout
    assert "BROKER_TIMEOUT" not in got["statuses"] and got["statuses"].count("NO_NEW_MSG") == 4


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
    assert m["keys"] == "retry-1"


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

    for i in range(100):
        producer.send(Message("SdkToCpp", "s→c %d ünï".encode() + bytes([i + 1]), tags=f"Tag{i % 3}",
                              keys=[f"k{i}", f"alt{i}"], properties={"color": "red" if i % 2 else "blue",
                                                                     "n": str(i)}))
    pulled = cpp(cluster, "pull", group="cpp-sdk-reader", topic="SdkToCpp", props=props)["messages"]
    assert len(pulled) == 100
    for m in pulled:
        i = int(m["props"]["n"])
        assert body_of(m) == "s→c %d ünï".encode() + bytes([i + 1])
        assert (m["keys"], m["tags"], m["props"]["color"]) == (f"k{i} alt{i}", f"Tag{i % 3}",
                                                               "red" if i % 2 else "blue")
