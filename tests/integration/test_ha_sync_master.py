"""SYNC_MASTER against real processes (issue 16, must show): the master is SIGKILLed at random points of a produce
loop, over several rounds, and restarted; every message it acknowledged (SEND_OK) is on the slave, and a consumer
reading from the slave (the master down) gets all of them. Without a slave, sends answer SLAVE_NOT_AVAILABLE."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from broker_core.client import AdminClient, ClientError, Message, Producer, SendStatus
from broker_core.codec.message_id import decode_offset_msg_id
from tests.integration.cluster import Cluster, wait_until
from tests.integration.test_ha_helpers import master, max_offset, read_all, slave, wait_connected

TOPIC = "TopicHaSync"
ROUNDS = 4


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path)
    yield c
    c.close()


def test_every_acknowledged_message_survives_master_kills(cluster: Cluster, tmp_path: Path) -> None:
    rnd = random.Random()
    m = master(tmp_path, cluster.namesrv, "SYNC_MASTER").start()
    s = slave(tmp_path, cluster.namesrv).start()
    acked: list[bytes] = []
    acked_phy: list[int] = []  # CommitLog offset of each acknowledged message
    statuses: dict[str, int] = {}
    stop = threading.Event()

    def produce() -> None:
        with Producer("ha-sync", cluster.namesrv, send_timeout=2.0) as producer:
            n = 0
            while not stop.is_set():
                body = b"sync-%08d" % n
                n += 1
                try:
                    result = producer.send(Message(TOPIC, body))
                except (ClientError, ConnectionError, TimeoutError):
                    statuses["error"] = statuses.get("error", 0) + 1
                    continue
                statuses[result.status.name] = statuses.get(result.status.name, 0) + 1
                if result.status is SendStatus.SEND_OK:
                    acked_phy.append(decode_offset_msg_id(result.offset_msg_id)[2])
                    acked.append(body)

    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 4, 4)
            thread = threading.Thread(target=produce, daemon=True)
            thread.start()
            port = m.port
            for _ in range(ROUNDS):
                target = len(acked) + rnd.randint(50, 400)
                wait_until(lambda target=target: len(acked) >= target, 120, f"{target} acknowledged sends")
                m.kill()  # at a random point of the loop: sends in flight get no answer or an error
                # before the master comes back (and resends what the slave lacks), the slave holds every
                # acknowledged message: its CommitLog ends past the start of the last one
                last = max(acked_phy)
                assert max_offset(admin, s.addr) > last
                m.start(port)
                wait_connected(admin, m)
            target = len(acked) + 100
            wait_until(lambda: len(acked) >= target, 120, "sends after the last restart")
            stop.set()
            thread.join(60)
            m.kill()  # the master is down: what the consumer reads comes from the slave
            got = read_all(cluster.namesrv, TOPIC, "ha-sync-reader", len(acked))
    finally:
        stop.set()
        m.stop()
        s.stop()
    assert statuses.get("SEND_OK", 0) == len(acked) > ROUNDS * 50
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged messages are not on the slave (statuses {statuses})"


def test_sync_master_without_a_slave_answers_slave_not_available(cluster: Cluster, tmp_path: Path) -> None:
    m = master(tmp_path, cluster.namesrv, "SYNC_MASTER").start()
    try:
        with AdminClient(cluster.namesrv) as admin, Producer("ha-sync-alone", cluster.namesrv) as producer:
            admin.create_topic(TOPIC, 1, 1)
            result = producer.send(Message(TOPIC, b"alone"))
            assert result.status is SendStatus.SLAVE_NOT_AVAILABLE
            no_wait = producer.send(Message(TOPIC, b"no wait", properties={"WAIT": "false"}))
            assert no_wait.status is SendStatus.SEND_OK  # WAIT=false: acknowledged after the master's own write
    finally:
        m.stop()
