"""What the official RocketMQ 5 clients check on every message they receive: ``SystemProperties.body_digest``.

Apache's proxy sends an MD5 digest, upper-case hex (``GrpcConverter.buildSystemProperties``), which every client
checks the same way. A CRC32 digest is printed differently by each client (the Node.js client in decimal, the
Java and Go clients without zero padding), so a CRC32 the broker formats one way reads as corrupted in another.
The bodies are chosen so that CRC32s start with zero hex digits. Both the Python client (5.1.2) and the Node.js
client (npm ``rocketmq-client-nodejs`` 1.0.8, ``node5/``) receive them in separate processes."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, Message, Producer
from tests.compat.grpc_cluster import create_group, endpoint, grpc_cluster, official
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

NODE5_DIR = Path(__file__).with_name("node5")


def bodies() -> list[bytes]:
    """Sixteen bodies: five whose CRC32 has a leading zero hex digit, two of those two leading zero digits."""
    chosen: list[bytes] = []
    one = two = plain = 0
    i = 0
    while len(chosen) < 16:
        body = f"digest-{i}".encode()
        crc = zlib.crc32(body)
        if crc < 0x0100_0000 and two < 2:
            two += 1
            chosen.append(body)
        elif 0x0100_0000 <= crc < 0x1000_0000 and one < 3:
            one += 1
            chosen.append(body)
        elif crc >= 0x1000_0000 and plain < 11:
            plain += 1
            chosen.append(body)
        i += 1
    return chosen


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not (NODE5_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir() or shutil.which("node") is None:
        pytest.fail("rocketmq-client-nodejs is not installed: run "
                    "`make tests/compat/node5/node_modules/.installed` (make test does)")
    c = grpc_cluster(tmp_path_factory.mktemp("digest"))
    try:
        yield c
    finally:
        c.close()


def node_receive(cluster: Cluster, **cmd: object) -> list[dict]:
    home = cluster.tmp / "node5-home"  # the client's logger writes under $HOME/logs
    home.mkdir(exist_ok=True)
    proc = subprocess.run(["node", str(NODE5_DIR / "receive.js"), json.dumps({"endpoint": endpoint(cluster), **cmd})],
                          capture_output=True, timeout=180, cwd=cluster.tmp, env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, f"node client failed: {proc.stderr.decode()[-3000:]}"
    return list(json.loads(proc.stdout.decode().strip().splitlines()[-1])["messages"])


def test_the_bodies_cover_crc32s_with_leading_zero_digits() -> None:
    crcs = [zlib.crc32(b) for b in bodies()]
    assert sum(c < 0x1000_0000 for c in crcs) == 5 and sum(c < 0x0100_0000 for c in crcs) == 2


def test_node_client_receives_nothing_corrupted(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("DigestNode", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-digest-node")
    sent = bodies()
    for body in sent:
        producer.send(Message("DigestNode", body))
    got = node_receive(cluster, group="g-digest-node", topic="DigestNode", expect=len(sent))
    assert sorted(base64.b64decode(m["body"]) for m in got) == sorted(sent)
    assert [m for m in got if m["corrupted"]] == []


def test_python_client_receives_nothing_corrupted(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("DigestPy", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-digest-py")
    sent = bodies()
    for body in sent:
        producer.send(Message("DigestPy", body))
    got = official(cluster, "receive", group="g-digest-py", topic="DigestPy", expect=len(sent))["messages"]
    assert sorted(m["body"].encode() for m in got) == sorted(sent)
    assert [m for m in got if m["corrupted"]] == []
