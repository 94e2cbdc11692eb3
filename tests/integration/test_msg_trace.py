"""Our SDK writing client-side trace records (``enable_msg_trace``) as Java clients with ``enableMsgTrace`` do:
a traced producer's Pub and a traced push consumer's SubBefore/SubAfter land in RMQ_SYS_TRACE_TOPIC, keyed by the
message id, in RocketMQ's TraceDataEncoder layout, beside the broker's own events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, ConsumeStatus, Message, Producer, PushConsumer
from broker_core.client.msg_trace import enable_msg_trace
from broker_core.codec.trace_data import decode_trace_data, is_trace_data
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("msg-trace"))
    try:
        c.add_brokers_registered({"broker-a": "traceTopicEnable=true\n"})
        yield c
    finally:
        c.close()


def test_traced_send_and_consume_write_trace_records(cluster: Cluster) -> None:
    with AdminClient(cluster.namesrv) as admin:
        admin.create_topic("TracedBySdk", 1, 1)
        wait_until(lambda: "RMQ_SYS_TRACE_TOPIC" in admin.topic_list(), timeout=30, what="the trace topic's route")
        producer = Producer("traced-producers", cluster.namesrv)
        ptrace = enable_msg_trace(producer)
        producer.start()
        sent = producer.send(Message("TracedBySdk", b"hello trace", tags="TagT", keys="order-9"))
        producer.shutdown()
        ptrace.shutdown()
        seen: list[str] = []
        consumer = PushConsumer("traced-consumers", cluster.namesrv, consume_from="FIRST")
        consumer.subscribe("TracedBySdk")
        consumer.register_message_listener(lambda msgs: (seen.extend(m.msg_id for m in msgs),
                                                         ConsumeStatus.CONSUME_SUCCESS)[1])
        ctrace = enable_msg_trace(consumer)
        consumer.start()
        try:
            wait_until(lambda: sent.msg_id in seen, timeout=60, what="the traced message consumed")
        finally:
            consumer.shutdown()
            ctrace.shutdown()

        def records() -> list[dict]:
            found, _ = admin.query_message("RMQ_SYS_TRACE_TOPIC", sent.msg_id, max_num=64)
            return [r for m in found if is_trace_data(m.body) for r in decode_trace_data(m.body)
                    if r["msgId"] == sent.msg_id]
        wait_until(lambda: {r["type"] for r in records()} == {"Pub", "SubBefore", "SubAfter"}, timeout=30,
                   what="the three trace records")
        by_type = {r["type"]: r for r in records()}
        pub, before, after = by_type["Pub"], by_type["SubBefore"], by_type["SubAfter"]
        assert (pub["groupName"], pub["topic"], pub["tags"], pub["keys"], pub["success"]) == (
            "traced-producers", "TracedBySdk", "TagT", "order-9", True)
        assert pub["offsetMsgId"] == sent.offset_msg_id and pub["storeHost"] == cluster.brokers["broker-a"].addr
        assert (before["groupName"], before["retryTimes"]) == ("traced-consumers", 0)
        assert (after["requestId"], after["success"], after["contextCode"], after["groupName"]) == (
            before["requestId"], True, "SUCCESS", "traced-consumers")
