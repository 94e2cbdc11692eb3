"""The retention and disk-check jobs against brokers whose clock and disk probe are set for the drill:
``clockOffsetMs`` puts one broker at 04:30 (its deleteWhen hour) and another at 03:30, and
``diskUsageProbeFile`` makes a broker read its disk use from a file (80 %, 86 %, 91 %, then 50 %)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from broker_core.client import AdminClient, ClientError, Message, Producer, PullConsumer
from tests.integration.cluster import Cluster
from workers import services

pytestmark = pytest.mark.integration

SEGMENT = 65536
BASE = (f"mapedFileSizeCommitLog={SEGMENT}\ncleanResourceInterval=0\ndeleteCommitLogFilesInterval=0\n"
        "mapedFileSizeConsumeQueue=2000\n")


def offset_to(hour: int) -> int:
    """Milliseconds from now to the next local hh:30 at least two hours ahead (segments written now are then
    more than an hour old on that broker's clock)."""
    now = datetime.now()
    target = (now + timedelta(hours=2)).replace(hour=hour, minute=30, second=0, microsecond=0)
    while target < now + timedelta(hours=2):
        target += timedelta(days=1)
    return int((target - now).total_seconds() * 1000)


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    tmp = tmp_path_factory.mktemp("drill")
    probe = tmp / "disk-ratio"
    probe.write_text("0.5")
    not_now = (datetime.now().hour + 12) % 24
    c = Cluster(tmp)
    try:
        c.add_broker("clock-04", BASE + f"deleteWhen=04\nfileReservedTime=1\nclockOffsetMs={offset_to(4)}\n")
        c.add_broker("clock-03", BASE + f"deleteWhen=04\nfileReservedTime=1\nclockOffsetMs={offset_to(3)}\n")
        c.add_broker("disk", BASE + f"deleteWhen={not_now:02d}\nfileReservedTime=72\ndiskUsageProbeFile={probe}\n")
        yield c, probe
    finally:
        c.close()


def fill(cluster: Cluster, broker: str, segments: int) -> tuple[str, list[str]]:
    topic = f"Drill{broker.replace('-', '')}"
    with AdminClient(cluster.namesrv) as admin:
        admin.create_topic(topic, 1, 1, brokers=[broker])
    producer = Producer("drill", cluster.namesrv).start()
    try:
        while len(commit_log(cluster, broker)) <= segments:
            producer.send_batch([Message(topic, bytes(range(256)) * 8) for _ in range(8)])  # 2 KiB, not compressed
    finally:
        producer.shutdown()
    return topic, commit_log(cluster, broker)


def commit_log(cluster: Cluster, broker: str) -> list[str]:
    return sorted(p.name for p in (cluster.brokers[broker].store_dir / "commitlog").iterdir() if p.name.isdigit())


def min_offset(cluster: Cluster, topic: str) -> int:
    pc = PullConsumer("drill-reader", cluster.namesrv).start()
    try:
        return pc.min_offset(pc.fetch_queues(topic)[0])
    finally:
        pc.shutdown()


def test_retention_deletes_expired_segments_at_the_delete_when_hour_only(drill):
    cluster, _ = drill
    topic04, before04 = fill(cluster, "clock-04", 4)
    _, before03 = fill(cluster, "clock-03", 4)

    run03 = services.run_retention("clock-03", cluster.brokers["clock-03"].addr)
    assert run03.outcome == "ok" and run03.counts["triggers"] == [] and run03.counts["commit_log_files_deleted"] == 0
    assert commit_log(cluster, "clock-03") == before03  # 03:30: nothing, however old

    deleted = 0
    for _ in range(3):  # a pass stops at a segment a reader still holds; the next pass takes it
        run = services.run_retention("clock-04", cluster.brokers["clock-04"].addr)
        assert run.outcome == "ok" and run.counts["triggers"] == ["time"]
        deleted += run.counts["commit_log_files_deleted"]
    with AdminClient(cluster.namesrv) as admin:
        max_offset = admin.broker_runtime(cluster.brokers["clock-04"].addr)["commit_log_max_offset"]
    active = max_offset - max_offset % SEGMENT
    # every sealed segment was expired and is gone; the active one (and a pre-allocated next one) stay
    assert deleted == active // SEGMENT == len([n for n in before04 if int(n) < active])
    assert run.counts["commit_log_min_offset"] == active
    assert all(int(n) >= active for n in commit_log(cluster, "clock-04"))
    assert min_offset(cluster, topic04) > 0  # the queue's min offset moved with the deleted segments


def test_disk_probe_drives_clean_forced_clean_refusal_and_release(drill):
    cluster, probe = drill
    addr = cluster.brokers["disk"].addr
    topic, _ = fill(cluster, "disk", 3)

    probe.write_text("0.80")  # past 75 %: a space-triggered clean, which still only removes expired files
    run = services.run_retention("disk", addr)
    assert run.counts["triggers"] == ["space"] and run.counts["commit_log_files_deleted"] == 0
    assert services.run_disk_check("disk", addr).counts["state"] == "clean"

    probe.write_text("0.86")  # past 85 %: clean at once, whatever the age
    run = services.run_retention("disk", addr)
    assert run.counts["commit_log_files_deleted"] >= 1
    assert services.run_disk_check("disk", addr).counts["state"] == "clean_forcibly"

    probe.write_text("0.91")  # past 90 %: the broker refuses writes, the job run is a failure
    check = services.run_disk_check("disk", addr)
    assert check.outcome == "failed" and check.counts["state"] == "full" and "refuses writes" in check.error
    producer = Producer("drill-disk", cluster.namesrv, retry_times_when_send_failed=0).start()
    try:
        with pytest.raises(ClientError) as refused:
            producer.send(Message(topic, b"no room"))
        assert "disk full" in str(refused.value)

        probe.write_text("0.50")  # back under 85 %: accepted again
        assert services.run_disk_check("disk", addr).outcome == "ok"
        deadline = time.monotonic() + 10
        while True:
            try:
                assert producer.send(Message(topic, b"room again")).status.value == "SEND_OK"
                break
            except ClientError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the producer's fault table may hold the broker out briefly
    finally:
        producer.shutdown()
