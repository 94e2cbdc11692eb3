"""Client-side trace records merged into the trace timeline: a real broker with ``traceTopicEnable=true`` stores a
message, and trace messages in RocketMQ's TraceDataEncoder layout (a producer's Pub; a consumer's SubBefore and,
in a later trace message, its SubAfter, as Java's AsyncTraceDispatcher sends them, keyed by the message id) go to
RMQ_SYS_TRACE_TOPIC beside the broker's own events, or to the broker's msgTraceTopicName; the Spark trace job shows
one timeline with both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.codec.trace_data import encode_trace_record
from spark_jobs.jobs.trace import run_trace
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("client-trace"))
    try:
        c.add_brokers_registered({"broker-t": "traceTopicEnable=true\nmsgTraceTopicName=App_TRACE_TOPIC\n"})
        yield c
    finally:
        c.close()


def test_client_records_merge_into_the_timeline(spark, cluster: Cluster, admin: AdminClient,  # type: ignore[no-untyped-def]
                                                producer: Producer) -> None:
    assert {"RMQ_SYS_TRACE_TOPIC", "App_TRACE_TOPIC"} <= set(admin.topic_list())  # both made at start-up
    admin.create_topic("ClientTraced", 1, 1)
    sent = producer.send(Message("ClientTraced", b"traced by its clients", keys="ct-key"))
    wait_until(lambda: admin.query_message("RMQ_SYS_TRACE_TOPIC", sent.msg_id)[0], timeout=15,
               what="the broker's stored event")
    stored_msg = admin.view_message(sent.offset_msg_id)
    stored = stored_msg.store_timestamp
    # the Pub's time is the send's start
    pub = encode_trace_record({"type": "Pub", "timestamp": stored_msg.born_timestamp, "groupName": "app-producers",
                               "topic": "ClientTraced", "msgId": sent.msg_id, "tags": "", "keys": "ct-key",
                               "storeHost": cluster.brokers["broker-t"].addr, "bodyLength": 21, "costTime": 4,
                               "offsetMsgId": sent.offset_msg_id, "success": True})
    before = encode_trace_record({"type": "SubBefore", "timestamp": stored + 20, "groupName": "app-consumers",
                                  "requestId": "REQ-1", "msgId": sent.msg_id, "retryTimes": 0, "keys": "ct-key"})
    # a CLOUD-style SubAfter (no time, no group): paired with its SubBefore by requestId
    after = "\u0001".join(["SubAfter", "REQ-1", sent.msg_id, "12", "true", "ct-key", "0"]) + "\u0002"
    other = encode_trace_record({"type": "SubBefore", "timestamp": stored, "groupName": "x", "requestId": "R9",
                                 "msgId": "SOMEONE-ELSE", "retryTimes": 0, "keys": ""})
    with Producer("_INNER_TRACE_PRODUCER-app", cluster.namesrv) as tp:
        tp.send(Message("RMQ_SYS_TRACE_TOPIC", (pub + other + before).encode(), keys=f"{sent.msg_id} ct-key"))
        # a client with customizedTraceTopic writes into the topic msgTraceTopicName made at start-up
        tp.send(Message("App_TRACE_TOPIC", after.encode(), keys=sent.msg_id))
    manifest = admin.snapshot_segments("broker-t")
    try:
        result = run_trace(spark, manifest, msg_id=sent.msg_id)
    finally:
        admin.release_snapshot("broker-t", manifest["snapshotId"])
    steps = [(s["type"], s["source"]) for s in result.timeline if s["msgId"] == sent.msg_id]
    assert steps == [("produced", "commitlog"), ("client-sent", "client"), ("stored", "trace"),
                     ("client-consume-start", "client"), ("client-consumed", "client")]
    assert [s["group"] for s in result.timeline if s["source"] == "client"] == ["", "app-consumers", "app-consumers"]
    by_type = {s["type"]: s for s in result.timeline}
    sent_step = by_type["client-sent"]
    assert sent_step["costMs"] == 4 and sent_step["status"] == "success"
    assert sent_step["extra"]["producerGroup"] == "app-producers" and sent_step["extra"]["clientHost"]
    consumed = by_type["client-consumed"]
    assert consumed["timestamp"] == stored + 20 + 12 and consumed["status"] == "SUCCESS" and consumed["costMs"] == 12
    assert result.groups["app-consumers"]["clientConsumed"] == 1
    assert all(s["msgId"] == sent.msg_id for s in result.timeline if s["source"] == "client")
    # the broker's own events about the trace message in App_TRACE_TOPIC (a topic it traces) are no steps
    assert {s["msgId"] for s in result.timeline} == {sent.msg_id}
