"""The real RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4, driver ``cpp_client.py``) reads from a slave while the
master is down (issue 16, must show): a master and a slave of one broker group, messages produced and
replicated, the master SIGKILLed; once the name server lists only the slave, the C++ client's pull consumer and
push consumer find the broker group through its route (brokerId 1 is the only address) and get every message
from the slave.

While the name server still lists the dead master (until its registration expires; this name server does not
drop a broker when its connection closes), the C++ client pulls from brokerId 0 only: its pulls answer
``BROKER_TIMEOUT`` with no message and it does not fall back to the slave (seen by hand with a 120 s expiry)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, Message, Producer
from tests.compat.cpp_driver import CPP_PYTHON, body_of, cpp, require
from tests.integration.cluster import Cluster, wait_until
from tests.integration.test_ha_helpers import GROUP, master, slave, wait_caught_up, wait_connected, wait_synced

pytestmark = pytest.mark.integration

TOPIC = "CppHaTopic"
N = 60


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    require(CPP_PYTHON)
    c = Cluster(tmp_path)  # its name server drops a broker 5 s after the broker's last registration
    yield c
    c.close()


def test_cpp_client_consumes_from_the_slave_while_the_master_is_down(cluster: Cluster, tmp_path: Path) -> None:
    m = master(tmp_path, cluster.namesrv).start()
    s = slave(tmp_path, cluster.namesrv).start()
    bodies = {b"cpp-ha-%03d" % i for i in range(N)}
    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_connected(admin, m)
            admin.create_topic(TOPIC, 2, 2)
            wait_until(lambda: TOPIC in admin.topic_list(), 30, f"route of {TOPIC}")
            with Producer("cpp-ha-producer", cluster.namesrv) as producer:
                for body in sorted(bodies):
                    assert producer.send(Message(TOPIC, body)).status.name == "SEND_OK"
            wait_caught_up(admin, m, s)
            wait_synced(admin, s)  # the slave knows the topic's config
            m.kill()

            def only_the_slave() -> bool:
                addrs = admin.cluster_info().get("brokerAddrTable", {}).get(GROUP, {}).get("brokerAddrs", {})
                return addrs == {"1": s.addr}

            wait_until(only_the_slave, 60, "the name server to list only the slave")
            route = admin.topic_route(TOPIC)
            assert [q["brokerName"] for q in route["queueDatas"]] == [GROUP]

        assert m.proc is not None and m.proc.poll() is not None  # every read below is served by the slave
        pulled = cpp(cluster, "pull", group="cpp-ha-puller", topic=TOPIC)
        assert pulled["queues"] == 2
        assert sorted(body_of(msg) for msg in pulled["messages"]) == sorted(bodies)

        pushed = cpp(cluster, "push", group="cpp-ha-pusher", topic=TOPIC, expect=N, timeout=90, settle=1)
        assert sorted(body_of(msg) for msg in pushed["messages"]) == sorted(bodies)
    finally:
        s.stop()
