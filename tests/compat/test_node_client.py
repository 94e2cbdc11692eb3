"""A second client not written here: ali-ons, the Node.js RocketMQ 4.x remoting client (npm, pinned in
``node/package-lock.json``, installed by ``make test``), against our name server and broker as a separate
process (``node/node_client.js``). It speaks JSON headers, SEND_MESSAGE_V2 and its own rebalance, so it checks
the protocol from a different code base than the C++ core."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.codec.message_id import decode_offset_msg_id
from tests.compat.test_cpp_client import sdk_pull_all
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

NODE_DIR = Path(__file__).with_name("node")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not (NODE_DIR / "node_modules" / "ali-ons").is_dir() or shutil.which("node") is None:
        pytest.fail("ali-ons is not installed: run `make tests/compat/node/node_modules/.installed` (make test does)")
    c = Cluster(tmp_path_factory.mktemp("node"))
    try:
        c.add_brokers_registered({"broker-a": ""})
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as a:
        yield a


def node(cluster: Cluster, op: str, timeout: float = 120, **cmd: Any) -> dict[str, Any]:
    cmd = {"op": op, "namesrv": cluster.namesrv, **cmd}
    proc = subprocess.run(["node", str(NODE_DIR / "node_client.js"), json.dumps(cmd)], capture_output=True,
                          timeout=timeout, cwd=NODE_DIR)
    assert proc.returncode == 0, f"ali-ons {op} failed: {proc.stderr.decode()[-3000:]}"
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def test_node_producer_to_sdk(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("NodeToSdk", 4, 4)  # ali-ons does not fall back to TBW102: the topic must exist
    msgs = [{"topic": "NodeToSdk", "body": base64.b64encode("n→s %d".encode() % i).decode(),
             "tags": f"Tag{i % 2}", "keys": [f"nk{i}", f"alt{i}"], "props": {"n": str(i)}} for i in range(30)]
    results = node(cluster, "produce", group="node-pg", messages=msgs)["results"]
    assert {r["status"] for r in results} == {"SEND_OK"}
    got = {m.properties["n"]: m for m in sdk_pull_all(cluster, "NodeToSdk")}
    assert len(got) == 30
    for i, r in enumerate(results):
        m = got[str(i)]
        assert (m.body, m.tags, m.keys) == ("n→s %d".encode() % i, f"Tag{i % 2}", [f"nk{i}", f"alt{i}"])
        # the client reports the broker's offset message id, queue and offset (queueId as the header string)
        assert decode_offset_msg_id(r["msgId"])[2] == m.commit_log_offset
        assert (int(r["queueId"]), r["queueOffset"]) == (m.queue_id, m.queue_offset)


def test_sdk_producer_to_node_consumer_with_tags_and_retry(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("SdkToNode", 2, 2)
    producer = Producer("sdk-node-pg", cluster.namesrv).start()
    try:
        for i in range(20):
            producer.send(Message("SdkToNode", b"s->n %d" % i, tags=f"Tag{i % 2}", keys=[f"k{i}"],
                                  properties={"n": str(i)}))
    finally:
        producer.shutdown()
    got = node(cluster, "consume", group="node-cg", topic="SdkToNode", expression="Tag1", expect=10)["messages"]
    assert sorted(base64.b64decode(m["body"]) for m in got) == sorted(b"s->n %d" % i for i in range(1, 20, 2))
    assert {m["tags"] for m in got} == {"Tag1"}
    assert all(m["props"]["n"] == str(int(base64.b64decode(m["body"]).split()[-1])) for m in got)
    assert {m["keys"] for m in got} == {f"k{i}" for i in range(1, 20, 2)}
    # ACTION_RETRY sends the message back; it returns through %RETRY%node-retry with reconsumeTimes 1
    retried = node(cluster, "consume", group="node-retry", topic="SdkToNode", expression="Tag0", expect=10,
                   retryOnce=True, timeout=90)["messages"]
    assert sorted(base64.b64decode(m["body"]) for m in retried) == sorted(b"s->n %d" % i for i in range(0, 20, 2))
    assert {m["reconsumeTimes"] for m in retried} == {1}
