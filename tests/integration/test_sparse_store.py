"""What a broker's store costs the disk, with RocketMQ's default file sizes (1 GiB CommitLog segments,
6,000,000-byte ConsumeQueue files, 5M-slot IndexFiles): a fresh broker almost nothing, a queue holding one message
a page or so. Measured as real blocks (``st_blocks * 512``), not file lengths: the files are sparse."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, Message, MessageQueue, Producer
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

KIB, MIB = 1024, 1024 * 1024
TOPICS, QUEUES = 100, 8
DEFAULT_SIZES = ("mapedFileSizeCommitLog=1073741824\nmapedFileSizeConsumeQueue=6000000\nmaxHashSlotNum=5000000\n"
                 "maxIndexNum=20000000\n")


def real_bytes(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def store_bytes(root: Path) -> int:
    return sum(real_bytes(p) for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sparse"))
    try:
        c.add_brokers_registered({"broker-sparse": DEFAULT_SIZES})
        yield c
    finally:
        c.close()


def test_a_fresh_broker_and_800_queues_of_one_message(cluster: Cluster, admin: AdminClient, producer: Producer):
    root = cluster.brokers["broker-sparse"].store_dir
    fresh = store_bytes(root)
    assert fresh < 64 * MIB, f"a fresh broker's store takes {fresh} bytes of disk"

    topics = [f"Sparse{t}" for t in range(TOPICS)]
    for topic in topics:
        admin.create_topic(topic, QUEUES, QUEUES)
    for topic in topics:
        for q in range(QUEUES):
            producer.send(Message(topic, b"one message", keys=[f"{topic}-{q}"]),
                          queue=MessageQueue(topic, "broker-sparse", q))

    cq_root = root / "consumequeue"

    def dispatched() -> list[Path]:
        return [p for p in cq_root.rglob("0" * 20) if p.parent.parent.name.startswith("Sparse")]

    wait_until(lambda: len(dispatched()) == TOPICS * QUEUES, what="a ConsumeQueue file per queue")
    for topic in topics:  # every unit in place (the file exists before its first unit is written)
        wait_until(lambda t=topic: [r["maxOffset"] for r in admin.topic_stats(t)] == [1] * QUEUES,  # type: ignore[misc]
                   what=f"{topic}'s units")
    for path in dispatched():
        assert path.stat().st_size == 6_000_000
        assert real_bytes(path) < 64 * KIB, f"{path} takes {real_bytes(path)} bytes of disk"
    total = store_bytes(root)
    assert total < 64 * MIB, f"the store takes {total} bytes of disk after {TOPICS * QUEUES} messages"
