"""Replication between real broker processes (issue 16, must show): after 100k messages the slave's CommitLog is
byte-identical to the master's, with a slave SIGKILLed and restarted mid-stream and a second slave started late
(empty) that catches up from the start of the master's last segment; the slaves dispatch their own
ConsumeQueues; a slave refuses sends with RocketMQ's status and copies the master's topics and offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster, wait_until
from tests.integration.test_ha_helpers import commit_log, master, runtime, slave, wait_caught_up, wait_connected

TOPIC = "TopicHaRepl"
BATCHES, PER_BATCH = 500, 200  # 100k messages


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path)
    yield c
    c.close()


def queue_max(client: BlockingClient, addr: str, queue_id: int) -> int:
    resp = client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC,
                                                                                     "queueId": queue_id}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.header["offset"])


def test_commit_logs_are_byte_identical_after_100k_messages(cluster: Cluster, tmp_path: Path) -> None:
    m = master(tmp_path, cluster.namesrv).start()
    s1 = slave(tmp_path, cluster.namesrv, 1).start()
    s2 = slave(tmp_path, cluster.namesrv, 2)
    blocking = BlockingClient()
    try:
        with AdminClient(cluster.namesrv) as admin, Producer("ha-repl", cluster.namesrv) as producer:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 4, 4)
            for b in range(BATCHES):
                msgs = [Message(TOPIC, b"m%07d" % (b * PER_BATCH + i)) for i in range(PER_BATCH)]
                assert producer.send_batch(msgs).status.name == "SEND_OK"
                if b == 150:
                    s1.kill()  # mid-stream: the slave restarts from what it had written
                if b == 300:
                    s1.start()
            s2.start()  # late, with an empty store
            wait_connected(admin, m, 2)
            end = wait_caught_up(admin, m, s1)
            wait_caught_up(admin, m, s2)
            assert end > 3 * 4 * 1024 * 1024  # several 4 MiB segments, so rolls (blank records) were copied
            for q in range(4):  # each slave built its own ConsumeQueues from the bytes
                want = queue_max(blocking, m.addr, q)
                wait_until(lambda q=q, want=want: queue_max(blocking, s1.addr, q) == want, 60, "s1 dispatch")
                wait_until(lambda q=q, want=want: queue_max(blocking, s2.addr, q) == want, 60, "s2 dispatch")
            assert sum(queue_max(blocking, m.addr, q) for q in range(4)) == BATCHES * PER_BATCH
            s2_min = int(runtime(admin, s2.addr)["commitLogMinOffset"])
            seg = 4 * 1024 * 1024
            assert s2_min == end - end % seg  # the late slave started at the master's last segment
    finally:
        blocking.close()
        for b in (m, s1):
            assert b.stop() == 0
        s2.stop()
    theirs = commit_log(m.store_dir)
    assert commit_log(s1.store_dir) == theirs
    late = commit_log(s2.store_dir)
    assert late and set(late) < set(theirs)
    assert all(theirs[name] == data for name, data in late.items())


def test_a_slave_is_read_only_and_copies_the_masters_metadata(cluster: Cluster, tmp_path: Path) -> None:
    m = master(tmp_path, cluster.namesrv).start()
    s = slave(tmp_path, cluster.namesrv).start()
    blocking = BlockingClient()
    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 2, 2)
            commit = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "g-copied", "topic": TOPIC, "queueId": 1, "commitOffset": 7})
            assert blocking.invoke(m.addr, commit).code == ResponseCode.SUCCESS
            query = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                            {"consumerGroup": "g-copied", "topic": TOPIC, "queueId": 1})

            def copied() -> bool:
                resp = blocking.invoke(s.addr, RemotingCommand(query.code, 0, query.flags, dict(query.header)))
                return resp.code == ResponseCode.SUCCESS and resp.header.get("offset") in (7, "7")

            wait_until(copied, 60, "the slave to copy the master's topic and offsets")
            send = RemotingCommand.request(RequestCode.SEND_MESSAGE, {
                "producerGroup": "p", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0}, b"refused")
            refused = blocking.invoke(s.addr, send)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "messages are put to the slave" in refused.remark
            assert int(runtime(admin, s.addr)["commitLogMaxOffset"]) == int(runtime(admin, m.addr)[
                "commitLogMaxOffset"])
    finally:
        blocking.close()
        m.stop()
        s.stop()


def test_a_slave_promoted_by_hand_takes_writes_where_the_master_stopped(cluster: Cluster, tmp_path: Path) -> None:
    m = master(tmp_path, cluster.namesrv).start()
    s = slave(tmp_path, cluster.namesrv).start()
    blocking = BlockingClient()
    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 1, 1)
            with Producer("ha-promote", cluster.namesrv) as producer:
                for i in range(50):
                    producer.send(Message(TOPIC, b"before-%d" % i))
            wait_caught_up(admin, m, s)
            m.kill()
            admin.update_broker_config(s.addr, {"brokerRole": "ASYNC_MASTER"})
            info = runtime(admin, s.addr)
            assert (info["role"], info["brokerId"]) == ("ASYNC_MASTER", "0")
            wait_until(lambda: admin.cluster_info()["brokerAddrTable"]["broker-ha"]["brokerAddrs"].get("0")
                       == s.addr, 60, "the name server to list the promoted slave as brokerId 0")
        with Producer("ha-promote", cluster.namesrv) as producer:
            result = producer.send(Message(TOPIC, b"after"))
        assert result.status.name == "SEND_OK" and result.queue_offset == 50  # continues the queue
    finally:
        blocking.close()
        m.stop()
        s.stop()
