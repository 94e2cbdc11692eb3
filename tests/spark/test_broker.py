"""Spark jobs against a real broker process: the source reads every record of its store with the same values
as the broker's own reads (through a snapshot taken with the admin operation), nothing past the snapshot's
bound, and a message retried twice, dead-lettered and resent traces as its full timeline."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, ConsumeStatus, Message, Producer, PushConsumer
from broker_core.codec.message import COMPRESSED_FLAG
from spark_jobs.jobs.trace import run_trace
from spark_jobs.segments import segments_from_manifest
from spark_jobs.sources import records_df
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

FAST = ("messageDelayLevel=" + " ".join(f"{100 * (i + 1)}ms" for i in range(18)) + "\nscheduleDeliverIntervalMs=20\n"
        "traceTopicEnable=true\nmapedFileSizeCommitLog=262144\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("spark-broker"))
    try:
        c.add_brokers_registered({"broker-s": FAST})
        yield c
    finally:
        c.close()


def test_source_reads_the_brokers_records_and_nothing_past_the_bound(spark, cluster: Cluster, admin: AdminClient,
                                                                     producer: Producer):
    admin.create_topic("Src", 4, 4)
    sent = [producer.send(Message("Src", (f"m{i}:" + "x" * 1000).encode(), tags=f"t{i % 3}", keys=f"k{i} j{i}",
                                  properties={"n": str(i)})) for i in range(600)]
    sent.append(producer.send(Message("Src", b"y" * 9000, keys="big")))  # sent compressed
    manifest = admin.snapshot_segments("broker-s")
    assert len(manifest["segments"]) >= 3 and manifest["segments"][-1]["sealed"] is False
    assert all(Path(s["path"]).is_absolute() and Path(s["path"]).exists() for s in manifest["segments"])
    # written after the snapshot: the active segment's link sees these bytes, the source must not
    for i in range(20):
        producer.send(Message("Src", b"after", keys=f"after-{i}"))
    segments = segments_from_manifest(manifest)
    rows = records_df(spark, segments, split_bytes=50_000).filter("topic = 'Src'").collect()
    assert len(rows) == len(sent)
    by_id = {r["offset_msg_id"]: r for r in rows}
    assert set(by_id) == {s.offset_msg_id for s in sent}
    for s in sent[::7] + sent[-1:]:
        m = admin.view_message(s.offset_msg_id)  # the broker's own read
        r = by_id[s.offset_msg_id]
        body = bytes(r["body"])
        if r["sys_flag"] & COMPRESSED_FLAG:
            body = zlib.decompress(body)
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["phy_offset"], r["msg_id"]) == (
            m.topic, m.queue_id, m.queue_offset, m.commit_log_offset, m.msg_id)
        assert body == m.body and dict(r["properties"]) == m.properties and list(r["keys"]) == m.keys
        assert (r["tags"], r["born_timestamp"], r["store_timestamp"], r["reconsume_times"], r["store_host"]) == (
            m.tags, m.born_timestamp, m.store_timestamp, m.reconsume_times, m.store_host)
    assert not any(r["keys"] and r["keys"][0].startswith("after-") for r in rows)
    assert admin.release_snapshot("broker-s", manifest["snapshotId"]) is True
    assert not Path(manifest["exportDir"]).exists()
    assert admin.release_snapshot(cluster.brokers["broker-s"].addr, manifest["snapshotId"]) is False


def test_trace_of_a_message_retried_twice_dead_lettered_and_resent(spark, cluster: Cluster, admin: AdminClient,
                                                                   producer: Producer, tmp_path: Path):
    admin.create_topic("SparkTraced", 1, 1)
    c = PushConsumer("spark-trace-group", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0,
                     max_reconsume_times=2, enable_trace=True)
    c.subscribe("SparkTraced")
    c.register_message_listener(lambda msgs: ConsumeStatus.RECONSUME_LATER)
    c.start()
    try:
        sent = producer.send(Message("SparkTraced", b"follow me", keys="spark-trace-key"))
        wait_until(lambda: len(admin.dead_letters("spark-trace-group")) == 1, timeout=30, what="the dead letter")
    finally:
        c.shutdown()
    (dead,) = admin.dead_letters("spark-trace-group")
    (resent,) = admin.resend_dead_letters("spark-trace-group", [dead.offset_msg_id])
    expected = ["stored", "delivered", "reconsume-later", "retry", "delivered-after-delay", "delivered",
                "reconsume-later", "retry", "delivered-after-delay", "delivered", "reconsume-later", "dead-lettered",
                "resent"]

    def events_written() -> bool:
        records, _ = admin.query_message("RMQ_SYS_TRACE_TOPIC", sent.msg_id, max_num=200)
        return sorted(json.loads(m.body)["type"] for m in records) == sorted(expected)

    wait_until(events_written, timeout=15, what="the trace events")
    manifest = admin.snapshot_segments("broker-s")
    progress: list[dict] = []
    try:
        result = run_trace(spark, manifest, msg_id=sent.msg_id, progress=progress.append,
                           output_dir=str(tmp_path / "trace"))
    finally:
        admin.release_snapshot("broker-s", manifest["snapshotId"])
    mine = [s for s in result.timeline if s["msgId"] == sent.msg_id]
    assert [s["type"] for s in mine] == ["produced", *expected]
    assert [s["attempt"] for s in mine if s["type"] == "delivered"] == [1, 2, 3]
    assert [s["reconsumeTimes"] for s in mine if s["type"] == "delivered"] == [0, 1, 2]
    retries = [s for s in mine if s["type"] == "retry"]
    assert [s["delayLevel"] for s in retries] == [3, 4] and all(s["delayMs"] > 0 for s in retries)
    assert all(s["record"] for s in retries)  # joined to the %RETRY% records
    assert next(s for s in mine if s["type"] == "dead-lettered")["record"]["topic"] == "%DLQ%spark-trace-group"
    assert mine[-1]["extra"]["newMsgId"] == resent["newMsgId"]
    # the link is followed: the resent message's own steps come after the resend
    linked = [s for s in result.timeline if s["msgId"] == resent["newMsgId"]]
    assert linked and linked[0]["type"] == "stored" and linked[0]["depth"] == 1
    assert result.timeline.index(linked[0]) > result.timeline.index(mine[-1])
    assert result.ids == [sent.msg_id, resent["newMsgId"]]
    g = result.groups["spark-trace-group"]
    assert g["delivered"] == 3 and g["reconsumeLater"] == 3 and len(g["retries"]) == 2 and g["deadLettered"]
    assert g["resent"] == [resent["newMsgId"]]
    assert progress and progress[-1]["fraction"] == 1.0 and progress[-1]["tasks_total"] >= 1
    assert Path(result.outputs["timeline"]).read_text().count("\n") == len(result.timeline)
