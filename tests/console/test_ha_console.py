"""The console and a real broker group (issue 16): a master and a slave (real processes, their own name server so
the suite's cluster stays as it is) on the cluster page and in ``GET /api/v1/cluster/brokers/`` with role, broker
id and replication lag; a ``replication_lag_bytes`` alert that fires while the slave is stopped (SIGSTOP) and
messages arrive, and resolves when it catches up; ``/healthz`` listing the slave, a dead slave and a dead master."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from broker_core.client import AdminClient, Message, Producer
from console.alerts.models import Alert, AlertRule
from console.alerts.services import evaluate
from console.selectors.replication import broker_groups
from tests.integration.cluster import BrokerProcess, start_ready, stop_process, wait_until
from tests.integration.test_ha_helpers import GROUP, master, slave, wait_caught_up, wait_connected

TOPIC = "TopicHaConsole"


@dataclass
class Pair:
    namesrv: str
    admin: AdminClient
    master: BrokerProcess
    slave: BrokerProcess

    def produce(self, n: int) -> None:
        with Producer(f"ha-console-{os.getpid()}", self.namesrv) as producer:
            for i in range(n):
                assert producer.send(Message(TOPIC, b"m%05d" % i)).status.name == "SEND_OK"


@pytest.fixture
def pair(tmp_path: Path, settings: Any) -> Iterator[Pair]:
    """A name server that keeps a dead broker listed (120 s) and a master (silent slaves not dropped) with one
    slave, caught up; the console points at that name server."""
    ns_proc, ports = start_ready(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0", "--scan-interval-ms",
                                  "500", "--broker-expire-ms", "120000"], tmp_path / "namesrv.log")
    namesrv = f"127.0.0.1:{ports['port']}"
    m = master(tmp_path, namesrv, extra="haHousekeepingInterval=600000\n").start()
    s = slave(tmp_path, namesrv).start()
    admin = AdminClient(namesrv).start()
    try:
        wait_connected(admin, m)
        admin.create_topic(TOPIC, 2, 2)
        wait_until(lambda: TOPIC in admin.topic_list(), 30, f"route of {TOPIC}")
        p = Pair(namesrv, admin, m, s)
        p.produce(20)
        wait_caught_up(admin, m, s)
        wait_until(lambda: "1" in admin.cluster_info()["brokerAddrTable"][GROUP]["brokerAddrs"], 30,
                   "the slave to register")
        settings.BROKER_CORE_NAMESRV = namesrv
        yield p
    finally:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.send_signal(signal.SIGCONT)
        admin.shutdown()
        for b in (s, m):
            b.stop()
        stop_process(ns_proc)


def _viewer_page() -> Client:
    user = User.objects.create_user("pam", password="pw")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client


def _slave_lag(p: Pair) -> int | None:
    (group,) = broker_groups()
    return group["slaves"][0]["lag_bytes"]


def test_api_and_cluster_page_show_the_master_and_slave_with_their_lag(pair: Pair, viewer: APIClient) -> None:
    resp = viewer.get("/api/v1/cluster/brokers/")
    assert resp.status_code == 200, resp.json()
    body = resp.json()
    rows = {r["broker_id"]: r for r in body["results"]}
    assert body["count"] == 2 and set(rows) == {0, 1}
    m, s = rows[0], rows[1]
    assert (m["broker_name"], m["role"], m["addr"], m["up"]) == (GROUP, "ASYNC_MASTER", pair.master.addr, True)
    assert (s["broker_name"], s["role"], s["addr"], s["up"], s["connected"]) == (
        GROUP, "SLAVE", pair.slave.addr, True, True)
    assert s["commit_log_max_offset"] == m["commit_log_max_offset"] > 0
    assert (s["lag_bytes"], s["lag_seconds"], s["lag_source"]) == (0, 0, "master")  # the master's view
    (group,) = body["groups"]
    assert group["name"] == GROUP and group["worst_lag_bytes"] == 0 and len(group["connections"]) == 1

    html = _viewer_page().get("/cluster/").content.decode()
    slave_row = html.split('data-testid="broker-broker-ha-1"', 1)[1].split("</tr>", 1)[0]
    assert pair.slave.addr in slave_row and "SLAVE" in slave_row and "up" in slave_row
    assert f"<td>{s['commit_log_max_offset']}</td>" in slave_row
    master_row = html.split('data-testid="broker-broker-ha-0"', 1)[1].split("</tr>", 1)[0]
    assert "ASYNC_MASTER" in master_row and "worst slave: 0 B" in master_row


def test_replication_lag_alert_fires_while_the_slave_is_stopped_and_resolves(pair: Pair, admin: APIClient) -> None:
    assert admin.post("/api/v1/alert-rules/", {"name": "zero", "kind": "replication_lag_bytes",
                                               "threshold": 0}, format="json").status_code == 400
    resp = admin.post("/api/v1/alert-rules/", {"name": "slave behind", "kind": "replication_lag_bytes",
                                               "target": "broker-*", "threshold": 1}, format="json")
    assert resp.status_code == 201, resp.json()
    rule = AlertRule.objects.get(pk=resp.json()["id"])
    evaluate(rules=[rule])
    assert not Alert.objects.filter(rule=rule).exists()  # caught up: lag 0

    assert pair.slave.proc is not None
    pair.slave.proc.send_signal(signal.SIGSTOP)
    try:
        pair.produce(10)
        report = evaluate(rules=[rule])
        assert report.fired == 1, report
        alert = Alert.objects.get(rule=rule)
        assert (alert.state, alert.subject) == (Alert.FIRING, GROUP) and alert.value is not None and alert.value > 0
        lag = _slave_lag(pair)  # the stopped slave does not answer: the master's connection speaks for it
        assert lag is not None and lag > 0
    finally:
        pair.slave.proc.send_signal(signal.SIGCONT)
    wait_caught_up(pair.admin, pair.master, pair.slave)
    wait_until(lambda: _slave_lag(pair) == 0, 60, "the slave's acknowledgement to reach the master")
    assert evaluate(rules=[rule]).resolved == 1
    assert Alert.objects.get(rule=rule).state == Alert.RESOLVED


def test_healthz_lists_the_slave_a_dead_slave_and_a_dead_master(pair: Pair) -> None:
    resp = APIClient().get("/healthz")
    assert resp.status_code == 200, resp.json()
    body = resp.json()
    assert body["brokers"] == {GROUP: "ok"}
    group = body["replication"][GROUP]
    assert group["master"] == "ok" and group["worst_lag_bytes"] == 0
    assert group["slaves"] == {"1": {"addr": pair.slave.addr, "status": "ok", "connected": True, "lag_bytes": 0,
                                     "lag_seconds": 0}}

    pair.slave.kill()  # still listed by the name server: reported, but the group's master serves
    wait_connected(pair.admin, pair.master, 0)
    resp = APIClient().get("/healthz")
    assert resp.status_code == 200, resp.json()
    dead = resp.json()["replication"][GROUP]["slaves"]["1"]
    assert dead["status"].startswith("error") and dead["lag_bytes"] is None

    pair.slave.start()
    wait_connected(pair.admin, pair.master)
    pair.master.kill()
    resp = APIClient().get("/healthz")
    assert resp.status_code == 503
    body = resp.json()
    assert body["brokers"][GROUP].startswith("error")
    group = body["replication"][GROUP]
    assert group["master"].startswith("error") and group["slaves"]["1"]["status"] == "ok"
