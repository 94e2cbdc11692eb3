"""Push consumers' invisible time renewed as Apache's proxy does (broker_core/grpc/renew.py), with the official
Python PushConsumer (``auto_renew`` receives): its messages are handed out for ``defaultInvisibleTimeMills``
(3 s here) and a listener that takes longer (6 s) does not see them again, because the broker renews them
ahead of their deadline; the listener's ack, with the handle it was first given, finishes them (the group's
offset reaches the end)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, Message, Producer
from tests.compat.grpc_cluster import create_group, official
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

RENEW_CONF = ("grpcListenPort=0\nautoCreateTopicEnable=false\ndefaultInvisibleTimeMills=3000\n"
              "renewAheadTimeMillis=2500\nrenewSchedulePeriodMillis=200\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("grpc-renew"))
    try:
        c.add_brokers_registered({"broker-a": RENEW_CONF})
        yield c
    finally:
        c.close()


def test_a_slow_push_listener_keeps_its_messages_invisible(cluster: Cluster, admin: AdminClient,
                                                           producer: Producer) -> None:
    admin.create_topic("GRenew", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-renew")
    for i in range(2):
        producer.send(Message("GRenew", f"slow-{i}".encode()))
    got = official(cluster, "push", group="g-renew", topic="GRenew", expect=2, slow=6.0, within=120, settle=3.0)
    # each delivered once: without the renewal both would come back after 3 s, during the 6 s listener
    assert sorted(m["body"] for m in got["deliveries"]) == ["slow-0", "slow-1"], got["deliveries"]
    assert {m["attempt"] for m in got["deliveries"]} == {1}
    stats = admin.consume_stats("g-renew", "GRenew")
    assert sum(q["consumerOffset"] for q in stats["offsetTable"]) == 2  # acked with the first handles
