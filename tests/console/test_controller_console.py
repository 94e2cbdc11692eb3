"""The console in controller mode (RocketMQ 5 automatic failover): a name server with the embedded controller
and two stand-in brokers of one broker-set. The sampler records the set and, once the master's connections close
and the controller elects the other broker, the election; an ``election`` alert rule fires for it; the cluster
page shows master, epoch, SyncStateSet and history; an operator's switch-over (confirmed, audited) elects the
chosen broker, a viewer may not."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from broker_core.client.controller_admin import ControllerAdmin
from broker_core.protocol import RemotingCommand
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ControllerRequestCode,
    ElectMasterRequestHeader,
    encode_sync_state_set,
)
from broker_core.remoting.blocking import BlockingClient
from console import broker_client
from console.alerts.models import Alert, AlertRule
from console.alerts.services import evaluate
from console.models import AuditEvent
from console.monitoring.controller_sampling import sample_controller
from console.monitoring.models import ControllerSnapshot, Election
from tests.integration.cluster import start_ready, stop_process, wait_until
from tests.integration.controller_procs import FakeBroker

R = ControllerRequestCode
CLUSTER, NAME = "DefaultCluster", "broker-ctl"


@dataclass
class Setup:
    addr: str
    admin: ControllerAdmin
    brokers: list[FakeBroker]


@pytest.fixture
def setup(tmp_path: Path, settings: Any) -> Iterator[Setup]:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort = 0\nenableControllerInNamesrv = true\n"
                    f"controllerStorePath = {tmp_path / 'controller'}\n")
    proc, ports = start_ready(["-m", "broker_core.namesrv", "--config", str(conf)], tmp_path / "namesrv.log")
    addr = f"127.0.0.1:{ports['port']}"
    admin = ControllerAdmin(addr)
    client = BlockingClient()
    brokers = [FakeBroker(CLUSTER, NAME, [addr]) for _ in range(2)]
    try:
        wait_until(lambda: _serving(admin), 60, "the embedded controller to serve")
        for b in brokers:
            b.join(client, addr)
            b.start_heartbeats()
        wait_until(lambda: all(r.alive for r in admin.sync_state_data([NAME])[NAME].not_in_sync_replicas), 30,
                   "both brokers alive")
        assert client.invoke(addr, RemotingCommand.request(
            R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(CLUSTER, NAME, 1).to_ext())).code == 0
        assert client.invoke(addr, RemotingCommand.request(
            R.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(NAME, 1, 1).to_ext(),
            encode_sync_state_set({1, 2}, 1))).code == 0
        # listed by the name server for the sampler's first pass, then gone (the stand-in serves no topics;
        # later passes ask about the sets they have snapshots of)
        brokers[0].register_namesrv(client, addr)
        settings.BROKER_CORE_NAMESRV = addr
        settings.BROKER_CORE_CONTROLLER = addr
        assert sample_controller()["sets"] == 1
        brokers[0].unregister_namesrv(client, addr)
        yield Setup(addr, admin, brokers)
    finally:
        for b in brokers:
            b.stop()
        client.close()
        admin.close()
        broker_client.reset()
        stop_process(proc, 20)


def _serving(admin: ControllerAdmin) -> bool:
    try:
        admin.sync_state_data(["none"])
    except (OSError, RuntimeError):
        return False
    return True


def _page(role: str, username: str) -> Client:
    user = User.objects.create_user(username, password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def _row(html: str) -> str:
    return html.split(f'data-testid="controller-{NAME}"', 1)[1].split("</tr>", 1)[0]


def test_election_is_sampled_alerted_and_shown(setup: Setup) -> None:
    rule = AlertRule.objects.create(name="elections", kind=AlertRule.ELECTION, target="broker-*")
    assert ControllerSnapshot.objects.filter(broker_name=NAME).count() == 1  # the fixture's first pass
    assert sample_controller() == {"sets": 1, "snapshots": 0, "elections": 0}  # unchanged: nothing new
    snap = ControllerSnapshot.objects.get(broker_name=NAME)
    assert (snap.master_broker_id, snap.master_epoch, [r["broker_id"] for r in snap.in_sync]) == (1, 1, [1, 2])
    assert evaluate(rules=[rule]).fired == 0

    setup.brokers[0].stop()  # the master's connections close: the controller elects broker 2
    wait_until(lambda: setup.admin.sync_state_data([NAME])[NAME].master_broker_id == 2, 30, "the new master")
    assert sample_controller()["elections"] == 1
    election = Election.objects.get(broker_name=NAME)
    assert (election.master_epoch, election.old_master_broker_id, election.new_master_broker_id,
            election.new_master_address, election.source) == (2, 1, 2, setup.brokers[1].addr, Election.OBSERVED)
    report = evaluate(rules=[rule])
    assert report.fired == 1, report
    alert = Alert.objects.get(rule=rule)
    assert (alert.state, alert.subject) == (Alert.FIRING, f"{NAME} masterEpoch 2")

    row = _row(_page("viewer", "vic").get("/cluster/").content.decode())
    assert f"2 <code>{setup.brokers[1].addr}</code>" in row.split('-master">', 1)[1]
    assert 'data-testid="controller-broker-ctl-epoch">2<' in row
    assert "epoch 2, 1 &rarr; 2" in row
    assert "make master" not in row  # a viewer gets no switch-over link


def test_switch_over_is_confirmed_audited_and_for_operators_only(setup: Setup) -> None:
    url = f"/cluster/switch-over/{NAME}/2/"
    assert _page("viewer", "vic").post(url, {"confirm_name": NAME}).status_code == 403
    operator = _page("operator", "olga")
    assert f'href="{url}"' in _row(operator.get("/cluster/").content.decode())
    confirm = operator.get(url)
    assert confirm.status_code == 200 and "Switch over" in confirm.content.decode()
    assert operator.post(url, {"confirm_name": "nope"}).status_code == 400
    assert setup.admin.sync_state_data([NAME])[NAME].master_broker_id == 1  # nothing happened yet
    resp = operator.post(url, {"confirm_name": NAME})
    assert resp.status_code == 302, resp.content.decode()[:500]
    info = setup.admin.sync_state_data([NAME])[NAME]
    assert (info.master_broker_id, info.master_epoch) == (2, 2)
    event = AuditEvent.objects.get(action="broker.switch_over")
    assert (event.username, event.target, event.ok) == ("olga", f"{NAME}/2", True)
    assert (event.before["master_broker_id"], event.after["master_broker_id"], event.after["master_epoch"]) == (
        1, 2, 2)
    election = Election.objects.get(broker_name=NAME)
    assert (election.source, election.by, election.new_master_broker_id) == (Election.SWITCH_OVER, "olga", 2)
    # the sampler sees the same epoch and does not record it twice
    sample_controller()
    assert Election.objects.filter(broker_name=NAME).count() == 1
    # broker 1 is out of the SyncStateSet now: the controller refuses (2012), the refusal is audited as failed
    refused = operator.post(f"/cluster/switch-over/{NAME}/1/", {"confirm_name": NAME})
    assert refused.status_code == 409 and "2012" in refused.content.decode()
    failed = AuditEvent.objects.get(action="broker.switch_over", target=f"{NAME}/1")
    assert failed.ok is False
    assert setup.admin.sync_state_data([NAME])[NAME].master_broker_id == 2


def test_rest_api_reads_the_groups_and_switches_over(setup: Setup, viewer: Any, operator: Any) -> None:
    body = viewer.get("/api/v1/cluster/controller/").json()
    assert (body["enabled"], body["error"], body["leader"]) == (True, "", setup.addr)
    (group,) = body["groups"]
    assert (group["name"], group["master_broker_id"], group["master_epoch"], group["sync_state_set"]) == (
        NAME, 1, 1, [1, 2])
    assert [(r["broker_id"], r["electable"]) for r in group["replicas"]] == [(1, False), (2, True)]
    assert viewer.post("/api/v1/cluster/controller/switch-over/", {"broker_name": NAME, "broker_id": 2},
                       format="json").status_code == 403
    resp = operator.post("/api/v1/cluster/controller/switch-over/", {"broker_name": NAME, "broker_id": 2},
                         format="json")
    assert resp.status_code == 200, resp.json()
    assert (resp.json()["master_broker_id"], resp.json()["master_epoch"]) == (2, 2)
    again = operator.post("/api/v1/cluster/controller/switch-over/", {"broker_name": NAME, "broker_id": 2},
                          format="json")
    assert again.status_code == 409 and "2011" in again.json()["error"], again.json()


def test_rest_api_without_a_controller(viewer: Any, operator: Any, settings: Any) -> None:
    settings.BROKER_CORE_CONTROLLER = ""
    assert viewer.get("/api/v1/cluster/controller/").json() == {"enabled": False, "error": "", "leader": None,
                                                                "groups": []}
    resp = operator.post("/api/v1/cluster/controller/switch-over/", {"broker_name": "b", "broker_id": 1},
                         format="json")
    assert resp.status_code == 409 and resp.json()["error"] == "controller_off"
