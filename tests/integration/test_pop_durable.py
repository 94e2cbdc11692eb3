"""Receive/ack across a broker restart (SIGKILL and SIGTERM), with a real broker process on the same store: no
acked message comes back, unacked ones come back (their count going on), a receipt handle from before the restart
still acks, and a message that keeps failing reaches the DLQ after exactly maxReconsumeTimes retries counted
across the restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, ClientError, Message, MessageExt, Producer, SimpleConsumer
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["ASYNC_FLUSH", "SYNC_FLUSH"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """With SYNC_FLUSH the journal is fsynced before each answer; with ASYNC_FLUSH once a second."""
    c = Cluster(tmp_path_factory.mktemp("pop-durable"))
    try:
        c.add_brokers_registered({"broker-a": f"flushDiskType={request.param}\n"})
        yield c
    finally:
        c.close()


def restart(cluster: Cluster, how: str) -> None:
    broker = cluster.brokers["broker-a"]
    port = broker.port
    if how == "sigkill":
        broker.kill()
    else:
        assert broker.stop() == 0
    broker.start(port=port)  # same store, same address


def receive_until(sc: SimpleConsumer, got: list[MessageExt], count: int, invisible: float, what: str) -> None:
    wait_until(lambda: got.extend(sc.receive(max_num=16, invisible_duration=invisible, wait=1.0)) or
               len(got) >= count, timeout=60, what=what)


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_acked_messages_never_come_back_and_unacked_ones_do(cluster: Cluster, admin: AdminClient,
                                                            producer: Producer, how: str) -> None:
    topic, group = f"Durable-{how}", f"durable-{how}"
    admin.create_topic(topic, 2, 2)
    for i in range(10):
        producer.send(Message(topic, f"m-{i}".encode()))
    sc = SimpleConsumer(group, cluster.namesrv).start()
    sc.subscribe(topic)
    try:
        kept = sc.receive(max_num=2, invisible_duration=120)  # invisible past the restart
        short: list[MessageExt] = []
        receive_until(sc, short, 8, 2.0, "the other eight")
        for m in short[:5]:
            sc.ack(m)
    finally:
        sc.shutdown()
    assert len({m.body for m in kept + short}) == 10
    acked = {m.body for m in short[:5]}
    unacked = {m.body: m for m in short[5:]}

    restart(cluster, how)

    sc = SimpleConsumer(group, cluster.namesrv).start()
    sc.subscribe(topic)
    try:
        sc.ack(kept[0])  # a handle from before the restart is still good until its deadline
        with pytest.raises(ClientError, match="unknown or was already used"):
            sc.ack(short[0])  # and an acked one stays acked
        again: list[MessageExt] = []
        receive_until(sc, again, 3, 60.0, "the unacked messages to come back")
        assert sorted(m.body for m in again) == sorted(unacked)
        assert all(m.reconsume_times == 1 for m in again)  # the count goes on
        assert {m.msg_id for m in again} == {m.msg_id for m in unacked.values()}
        for m in again:
            sc.ack(m)
        assert not acked & {m.body for m in again}
        assert sc.receive(max_num=16, invisible_duration=60, wait=1.0) == []  # kept[1] is still invisible
    finally:
        sc.shutdown()


def test_a_failing_message_reaches_the_dlq_after_max_reconsume_times_across_a_restart(
        cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("Poison", 1, 1)
    sent = producer.send(Message("Poison", b"poison"))
    attempts: list[int] = []

    def receive_attempts(n: int) -> None:
        sc = SimpleConsumer("poison-group", cluster.namesrv, max_reconsume_times=3).start()
        sc.subscribe("Poison")
        try:
            got: list[MessageExt] = []
            receive_until(sc, got, n, 1.0, f"{n} deliveries")  # never acked
            attempts.extend(m.reconsume_times for m in got)
        finally:
            sc.shutdown()

    receive_attempts(2)
    restart(cluster, "sigkill")
    receive_attempts(2)
    assert attempts == [0, 1, 2, 3]  # the first delivery and maxReconsumeTimes=3 retries, across the restart
    wait_until(lambda: any(m.body == b"poison" for m in admin.dead_letters("poison-group")), timeout=60,
               what="the dead letter")
    (dead,) = [m for m in admin.dead_letters("poison-group") if m.body == b"poison"]
    assert dead.reconsume_times == 3 and dead.msg_id == sent.msg_id
    sc = SimpleConsumer("poison-group", cluster.namesrv, max_reconsume_times=3).start()
    sc.subscribe("Poison")
    try:
        assert sc.receive(max_num=16, invisible_duration=1.0, wait=1.5) == []  # gone from the topic
    finally:
        sc.shutdown()
