"""Reads from a slave (issue 16, must show): with the master SIGKILLed in the middle of consumption, a push
consumer keeps consuming from the slave; when the master returns, the offsets consumed meanwhile are committed
back to it, so nothing is skipped and a new consumer of the group gets only new messages. Pull responses send a
lagging consumer to the slave when ``slaveReadEnable`` is on (``suggestWhichBrokerId``)."""

from __future__ import annotations

import collections
import threading
from pathlib import Path

import pytest

from broker_core.client import AdminClient, ConsumeStatus, Message, Producer, PullConsumer, PushConsumer
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster, wait_until
from tests.integration.test_ha_helpers import master, slave, wait_caught_up, wait_connected, wait_synced

TOPIC = "TopicHaFail"
GROUP = "ha-fail-group"
N, M = 2000, 200
BATCH = 32


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path)
    yield c
    c.close()


def committed(client: BlockingClient, addr: str, queue_id: int) -> int:
    try:
        resp = client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id}))
    except ConnectionError:
        return -1
    return int(resp.header["offset"]) if resp.code == ResponseCode.SUCCESS else -1


def produce(namesrv: str, bodies: list[bytes]) -> None:
    with Producer("ha-fail-producer", namesrv) as producer:
        for i in range(0, len(bodies), 100):
            assert producer.send_batch([Message(TOPIC, b) for b in bodies[i:i + 100]]).status.name == "SEND_OK"


def test_consumers_read_from_the_slave_while_the_master_is_down(cluster: Cluster, tmp_path: Path) -> None:
    m = master(tmp_path, cluster.namesrv).start()
    s = slave(tmp_path, cluster.namesrv).start()
    blocking = BlockingClient()
    seen: collections.Counter[bytes] = collections.Counter()
    gate = threading.Event()
    lock = threading.Lock()

    def listener(msgs: list) -> ConsumeStatus:  # type: ignore[type-arg]
        with lock:
            seen.update(msg.body for msg in msgs)
            total = sum(seen.values())
        if total >= N // 4:
            gate.wait(120)  # hold consumption until the master is down
        return ConsumeStatus.CONSUME_SUCCESS

    first = [b"first-%06d" % i for i in range(N)]
    consumer = None
    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 4, 4)
            produce(cluster.namesrv, first)
            wait_caught_up(admin, m, s)
            wait_synced(admin, s)  # the slave knows the topic (as upstream, it copies it every few seconds)
            consumer = PushConsumer(GROUP, cluster.namesrv, consume_from="FIRST", pull_batch_size=BATCH,
                                    persist_offset_interval=1.0)
            consumer.subscribe(TOPIC)
            consumer.register_message_listener(listener)
            consumer.start()
            wait_until(lambda: sum(seen.values()) >= N // 4, 60, "consumption to start")
            m.kill()
            gate.set()
            wait_until(lambda: set(seen) == set(first), 120, "every message, the rest from the slave")
            assert sum(seen.values()) - len(seen) <= 4 * BATCH  # redeliveries stay within the in-flight window
            port = m.port
            m.start(port)
            ends = {q: int(blocking.invoke(m.addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {
                "topic": TOPIC, "queueId": q})).header["offset"]) for q in range(4)}
            assert sum(ends.values()) == N
            wait_until(lambda: all(committed(blocking, m.addr, q) == ends[q] for q in range(4)), 120,
                       "the offsets consumed from the slave to be committed back to the master")
            consumer.shutdown()
            consumer = None
            before = collections.Counter(seen)
            seen.clear()
            later = [b"later-%06d" % i for i in range(M)]
            produce(cluster.namesrv, later)
            consumer = PushConsumer(GROUP, cluster.namesrv, consume_from="FIRST", pull_batch_size=BATCH)
            consumer.subscribe(TOPIC)
            consumer.register_message_listener(listener)
            consumer.start()
            wait_until(lambda: set(later) <= set(seen), 60, "the new messages")
            assert not set(seen) & set(before), "a new consumer of the group got messages consumed before"
    finally:
        gate.set()
        if consumer is not None:
            consumer.shutdown()
        blocking.close()
        m.stop()
        s.stop()


def test_a_lagging_consumer_is_sent_to_the_slave(cluster: Cluster, tmp_path: Path) -> None:
    # accessMessageInMemoryMaxRatio=0: any message behind the CommitLog end counts as "in disk" (lagging)
    m = master(tmp_path, cluster.namesrv, extra="slaveReadEnable=true\naccessMessageInMemoryMaxRatio=0\n").start()
    s = slave(tmp_path, cluster.namesrv, extra="slaveReadEnable=true\n").start()
    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 1, 1)
            bodies = [b"lag-%04d" % i for i in range(300)]
            produce(cluster.namesrv, bodies)
            wait_caught_up(admin, m, s)
            wait_synced(admin, s)
            consumer = PullConsumer("ha-lag", cluster.namesrv).start()
            try:
                (mq,) = consumer.fetch_queues(TOPIC)
                first = consumer.pull(mq, 0, 10)  # from the master, which suggests the slave (brokerId 1)
                assert consumer.pull_from[mq] == 1
                addr, is_slave = consumer.instance.find_broker(mq.broker_name, consumer.pull_from[mq])
                assert is_slave and addr == s.addr
                got = [msg.body for msg in first.messages]
                offset = first.next_begin_offset
                while offset < len(bodies):
                    res = consumer.pull(mq, offset, 100)
                    got += [msg.body for msg in res.messages]
                    offset = res.next_begin_offset
                assert got == bodies
                assert int(admin.broker_runtime(s.addr)["getTotal"]) > 0  # the slave served pulls
            finally:
                consumer.shutdown()
    finally:
        m.stop()
        s.stop()
