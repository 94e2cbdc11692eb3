"""Three controller processes (RocketMQ 5 controller mode): a leader serves and followers answer 2007; killing
the leader keeps the state and a new leader serves it; a dead master's closed connection makes the leader elect
a new one from the SyncStateSet and notify the survivor (1008); a restart of every controller keeps the state."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from broker_core.client.controller_admin import ControllerAdmin
from broker_core.errors import ClientError
from broker_core.protocol import RemotingCommand
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ControllerRequestCode,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    encode_sync_state_set,
)
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import start_ready, wait_until
from tests.integration.controller_procs import FakeBroker, controller_confs, start_controller, stop_process

R = ControllerRequestCode
CLUSTER, NAME = "DefaultCluster", "broker-a"


def _leader(admin: ControllerAdmin, exclude: str | None = None) -> str:
    found: list[str] = []

    def known() -> bool:
        try:
            addr = admin.leader(refresh=True)
        except ConnectionError:
            return False
        if addr == exclude:
            return False
        # serving, not only elected: a queued read answers
        try:
            admin.sync_state_data(["none"])
        except (ClientError, OSError):
            return False
        found.append(addr)
        return True
    wait_until(known, 60, "a serving controller leader")
    return found[-1]


@pytest.fixture
def controllers(tmp_path: Path):
    files, peers = controller_confs(tmp_path)
    procs = {peer: start_controller(f, tmp_path / f"n{i}.log")
             for i, (f, peer) in enumerate(zip(files, peers, strict=True))}
    yield files, peers, procs, tmp_path
    for proc in procs.values():
        stop_process(proc, 20)


def test_leader_serves_followers_refuse_and_failover_keeps_state(controllers):
    files, peers, procs, tmp = controllers
    admin = ControllerAdmin(";".join(peers))
    client = BlockingClient()
    brokers: list[FakeBroker] = []
    try:
        leader = _leader(admin)
        for follower in [p for p in peers if p != leader]:
            resp = client.invoke(follower, RemotingCommand.request(
                R.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, NAME).to_ext()))
            assert resp.code == ControllerResponseCode.CONTROLLER_NOT_LEADER
            wait_until(lambda f=follower: admin.metadata(f).leader_address == leader, 30,  # type: ignore[misc]
                       "the follower knows the leader")
            meta = admin.metadata(follower)
            assert (meta.leader_id, meta.is_leader, meta.group) == (f"n{peers.index(leader)}", False, "group1")
            assert [a for _, a in meta.peers] == peers
        brokers = [FakeBroker(CLUSTER, NAME, peers) for _ in range(2)]
        assert [b.join(client, leader) for b in brokers] == [1, 2]
        for b in brokers:
            b.start_heartbeats()
        wait_until(lambda: all(r.alive for r in admin.sync_state_data([NAME])[NAME].not_in_sync_replicas),
                   30, "both brokers alive at the leader")
        elected = client.invoke(leader, RemotingCommand.request(
            R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(CLUSTER, NAME, 1).to_ext()))
        assert elected.code == 0 and elected.header["masterEpoch"] == "1", elected.remark
        altered = client.invoke(leader, RemotingCommand.request(
            R.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(NAME, 1, 1).to_ext(),
            encode_sync_state_set({1, 2}, 1)))
        assert altered.code == 0 and altered.header["newSyncStateSetEpoch"] == "2", altered.remark

        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait()
        new_leader = _leader(admin, exclude=leader)
        info = admin.sync_state_data([NAME])[NAME]
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set_epoch) == (1, 1, 2)
        assert {r.broker_id for r in info.in_sync_replicas} == {1, 2}

        # the master's connections close (a crash): the new leader elects 2 from the SyncStateSet and tells it
        brokers[0].stop()
        def told(b: FakeBroker, epoch: str) -> list[RemotingCommand]:
            return [c for c in b.notifications if c.code == R.NOTIFY_BROKER_ROLE_CHANGED
                    and c.header.get("masterEpoch") == epoch]
        assert told(brokers[1], "1")  # the first election was announced to every alive member
        wait_until(lambda: bool(told(brokers[1], "2")), 30, "broker 2 told it is the master")
        note = told(brokers[1], "2")[0]
        assert note.is_oneway
        assert (note.header["masterBrokerId"], note.header["masterAddress"], note.header["syncStateSetEpoch"]) == (
            "2", brokers[1].addr, "3")
        info = admin.sync_state_data([NAME])[NAME]
        assert (info.master_broker_id, info.master_epoch) == (2, 2)
        assert {r.broker_id for r in info.in_sync_replicas} == {2}
        # an admin switch-over to a broker outside the SyncStateSet is refused, to the master gives 2011
        with pytest.raises(ClientError) as err:
            admin.elect_master(CLUSTER, NAME, 1)
        assert err.value.code == ControllerResponseCode.CONTROLLER_ELECT_MASTER_FAILED
        with pytest.raises(ClientError) as err:
            admin.elect_master(CLUSTER, NAME, 2)
        assert err.value.code == ControllerResponseCode.CONTROLLER_MASTER_STILL_EXIST
        assert new_leader != leader

        # every controller restarts (the killed one too) while broker 2 heartbeats: the journals keep the state
        for proc in procs.values():
            stop_process(proc, 20)
        for i, (f, peer) in enumerate(zip(files, peers, strict=True)):
            procs[peer] = start_controller(f, tmp / f"n{i}-again.log")
        _leader(admin)
        info = admin.sync_state_data([NAME])[NAME]
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set_epoch) == (2, 2, 3)
        assert {r.broker_id for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)} == {1, 2}
    finally:
        for b in brokers:
            b.stop()
        client.close()
        admin.close()


def test_controller_embedded_in_the_name_server(tmp_path: Path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort = 0\nenableControllerInNamesrv = true\ncontrollerDLegerGroup = embedded\n"
                    f"controllerStorePath = {tmp_path / 'controller'}\nscanNotActiveBrokerInterval = 1000\n")
    proc, ports = start_ready(["-m", "broker_core.namesrv", "--config", str(conf)], tmp_path / "namesrv.log")
    addr = f"127.0.0.1:{ports['port']}"
    admin = ControllerAdmin(addr)
    client = BlockingClient()
    broker = FakeBroker(CLUSTER, NAME, [addr])
    try:
        assert _leader(admin) == addr  # a group of one, at the name server's own address
        meta = admin.metadata()
        assert (meta.group, meta.leader_id, meta.is_leader, meta.peers) == ("embedded", "n0", True, [("n0", addr)])
        assert broker.join(client, addr) == 1
        broker.start_heartbeats()
        elected = client.invoke(addr, RemotingCommand.request(
            R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(CLUSTER, NAME, 1).to_ext()))
        assert elected.code == 0 and elected.header["masterBrokerId"] == "1"
        # the name server's own codes still answer on the same port
        routes = client.invoke(addr, RemotingCommand.request(106))
        assert routes.code == 0
        assert admin.controller_config(addr)["enableElectUncleanMaster"] == "false"
        with pytest.raises(ClientError) as err:
            admin.update_controller_config({"configStorePath": "/tmp/x"})
        assert err.value.code == 16  # NO_PERMISSION: blacklisted
        admin.update_controller_config({"enableElectUncleanMaster": "true"})
        assert admin.controller_config(addr)["enableElectUncleanMaster"] == "true"
    finally:
        broker.stop()
        client.close()
        admin.close()
        stop_process(proc, 20)
