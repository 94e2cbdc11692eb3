"""The controller's state machine without processes: registration, elections (§3.3), SyncStateSet changes with
their checks in RocketMQ's order (§3.4), clean (§6); every change goes through an event and ``apply``."""

from __future__ import annotations

import pytest

from broker_core.controller.elect import DefaultElectPolicy, LiveInfo
from broker_core.controller.events import ElectMasterEvent, decode_event, encode_event
from broker_core.controller.replicas import ControllerResult, ReplicasInfoManager
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
    decode_broker_replicas_info,
    decode_elect_master_body,
    decode_sync_state_set,
)
from broker_core.protocol.controller import ControllerResponseCode as C

CLUSTER, NAME = "DefaultCluster", "broker-a"
ADDR = {1: "127.0.0.1:30911", 2: "127.0.0.1:30921", 3: "127.0.0.1:30931"}


class World:
    """A manager, who is alive, and what their heartbeats said."""

    def __init__(self, unclean: bool = False) -> None:
        self.m = ReplicasInfoManager(unclean)
        self.alive: set[int] = set()
        self.live: dict[int, LiveInfo] = {}
        self.policy = DefaultElectPolicy(self.is_alive, lambda c, n, i: self.live.get(i))

    def is_alive(self, cluster: str, name: str, broker_id: int) -> bool:
        return broker_id in self.alive

    def commit(self, result: ControllerResult) -> ControllerResult:
        for event in result.events:  # through the log's bytes, as a follower would see them
            self.m.apply(decode_event(encode_event(event)))
        return result

    def join(self, broker_id: int) -> None:
        nxt = self.m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, NAME)).header
        assert nxt.next_broker_id == broker_id  # type: ignore[union-attr]
        r = self.commit(self.m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, NAME, broker_id,
                                                                           f"{ADDR[broker_id]};1700000000000")))
        assert r.code == 0, r.remark
        self.alive.add(broker_id)

    def elect(self, broker_id: int = -1, designate: bool = False) -> ControllerResult:
        return self.commit(self.m.elect_master(ElectMasterRequestHeader(CLUSTER, NAME, broker_id, designate),
                                               self.policy))

    def alter(self, ids: set[int], master: int, master_epoch: int, sss_epoch: int) -> ControllerResult:
        return self.commit(self.m.alter_sync_state_set(AlterSyncStateSetRequestHeader(NAME, master, master_epoch),
                                                       SyncStateSet(frozenset(ids), sss_epoch), self.is_alive))

    @property
    def info(self):
        return self.m.sync_state_info[NAME]


@pytest.fixture
def w() -> World:
    world = World()
    for i in (1, 2, 3):
        world.join(i)
    return world


def test_ids_are_assigned_from_one_and_checked():
    w = World()
    r = w.m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, NAME, 2, "x;1"))
    assert r.code == C.CONTROLLER_BROKER_ID_INVALID and not r.events  # unknown set: only id 1
    w.join(1)
    w.join(2)
    # id 2 taken with another check code -> 2014; the same code (a broker retrying) is accepted
    assert w.m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, NAME, 2, "other;1")).code == 2014
    again = w.commit(w.m.apply_broker_id(ApplyBrokerIdRequestHeader(CLUSTER, NAME, 2, f"{ADDR[2]};1700000000000")))
    assert again.code == 0
    assert w.m.replica_info[NAME].next_assign_broker_id == 3
    assert w.m.replica_info[NAME].brokers[2] == (ADDR[2], f"{ADDR[2]};1700000000000")


def test_register_needs_an_applied_id_and_records_a_new_address(w):
    unknown = w.m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, "nope", 1, ADDR[1]), w.is_alive)
    assert unknown.code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    bad_id = w.m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, NAME, 9, ADDR[1]), w.is_alive)
    assert bad_id.code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    r = w.commit(w.m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, NAME, 2, "10.0.0.2:1"),
                                     w.is_alive))
    assert r.code == 0 and r.header.master_broker_id is None  # no master yet: no master fields
    assert w.m.replica_info[NAME].address(2) == "10.0.0.2:1"
    w.elect(1)
    r = w.m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, NAME, 2, "10.0.0.2:1"), w.is_alive)
    assert (r.header.master_broker_id, r.header.master_address, r.header.master_epoch) == (1, ADDR[1], 1)
    assert not r.events
    w.alive.discard(1)  # a dead master is not announced
    r = w.m.register_broker(RegisterBrokerToControllerRequestHeader(CLUSTER, NAME, 2, "10.0.0.2:1"), w.is_alive)
    assert r.header.master_broker_id is None


def test_first_election_takes_the_requester_without_checks(w):
    w.alive.clear()
    r = w.elect(2)
    assert r.code == 0
    assert (r.header.master_broker_id, r.header.master_epoch, r.header.sync_state_set_epoch) == (2, 1, 1)
    body = decode_elect_master_body(r.body)
    assert body.sync_state_set == {2} and body.broker_member_group.broker_addrs == ADDR
    assert (w.info.master_broker_id, w.info.master_epoch, w.info.sync_state_set_epoch) == (2, 1, 1)
    assert w.info.sync_state_set == {2}


def test_old_master_alive_answers_2011_and_logs_nothing(w):
    w.elect(1)
    r = w.elect(2)  # a broker asking for itself while the master lives
    assert r.code == C.CONTROLLER_MASTER_STILL_EXIST and not r.events
    assert (r.header.master_broker_id, r.header.master_epoch) == (1, 1)
    assert decode_elect_master_body(r.body).broker_member_group is None


def test_election_prefers_epoch_then_offset_then_priority(w):
    w.elect(1)
    w.alter({1, 2, 3}, 1, 1, 1)
    w.alive.discard(1)
    w.live = {2: LiveInfo(2, 1, 500, 5), 3: LiveInfo(3, 1, 900, 9)}
    assert w.m.elect_master(ElectMasterRequestHeader(CLUSTER, NAME, -1), w.policy).header.master_broker_id == 3
    w.live = {2: LiveInfo(2, 2, 100, 5), 3: LiveInfo(3, 1, 900, 9)}
    assert w.m.elect_master(ElectMasterRequestHeader(CLUSTER, NAME, -1), w.policy).header.master_broker_id == 2
    w.live = {2: LiveInfo(2, 1, 900, 5), 3: LiveInfo(3, 1, 900, 1)}
    r = w.elect()
    assert r.header.master_broker_id == 3 and r.header.master_epoch == 2 and r.header.sync_state_set_epoch == 3
    assert w.info.sync_state_set == {3} and w.info.master_broker_id == 3


def test_never_outside_the_sync_state_set_unless_unclean(w):
    w.elect(1)  # SSS = {1}; 2 and 3 alive but not in sync
    w.alive.discard(1)
    r = w.elect()  # controller-triggered: nothing electable -> 2004, master cleared, epoch+1, SSS kept
    assert r.code == C.CONTROLLER_MASTER_NOT_AVAILABLE
    assert r.events == [ElectMasterEvent(NAME, False)]
    assert (w.info.master_broker_id, w.info.master_epoch, w.info.sync_state_set) == (None, 2, {1})
    r = w.elect(2)  # a broker asking: 2012, nothing logged
    assert r.code == C.CONTROLLER_ELECT_MASTER_FAILED and not r.events
    unclean = World(unclean=True)
    for i in (1, 2, 3):
        unclean.join(i)
    unclean.elect(1)
    unclean.alive.discard(1)
    assert unclean.elect().header.master_broker_id in (2, 3)


def test_designated_election_takes_only_an_alive_candidate(w):
    w.elect(1)
    w.alter({1, 2}, 1, 1, 1)
    assert w.elect(3, designate=True).code == C.CONTROLLER_ELECT_MASTER_FAILED  # 3 not in sync
    r = w.elect(2, designate=True)  # switch-over while the master lives
    assert r.code == 0 and r.header.master_broker_id == 2 and w.info.master_epoch == 2
    assert w.elect(2, designate=True).code == C.CONTROLLER_MASTER_STILL_EXIST


@pytest.mark.parametrize(("ids", "master", "mepoch", "sepoch", "dead", "code"), [
    ({1}, 1, 1, 1, None, C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # same set (checked first)
    ({1, 2}, 2, 9, 9, None, C.CONTROLLER_INVALID_MASTER),  # not the master (before the epochs)
    ({1, 2}, 1, 0, 9, None, C.CONTROLLER_FENCED_MASTER_EPOCH),  # old master epoch (before the SSS epoch)
    ({1, 2}, 1, 1, 0, None, C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
    ({1, 7}, 1, 1, 1, 7, C.CONTROLLER_INVALID_REPLICAS),  # unknown id (before liveness)
    ({1, 2}, 1, 1, 1, 2, C.CONTROLLER_BROKER_NOT_ALIVE),
    ({2, 3}, 1, 1, 1, None, C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # the set must hold the master
])
def test_alter_sync_state_set_checks_in_order(w, ids, master, mepoch, sepoch, dead, code):
    w.elect(1)
    if dead is not None:
        w.alive.discard(dead)
    r = w.alter(ids, master, mepoch, sepoch)
    assert r.code == code and not r.events
    assert w.info.sync_state_set == {1} and w.info.sync_state_set_epoch == 1


def test_alter_sync_state_set_success_and_unknown_set(w):
    w.elect(1)
    r = w.alter({1, 2}, 1, 1, 1)
    assert r.code == 0 and r.header.new_sync_state_set_epoch == 2
    assert decode_sync_state_set(r.body).sync_state_set == {1, 2}
    assert w.info.sync_state_set == {1, 2} and w.info.sync_state_set_epoch == 2
    other = w.m.alter_sync_state_set(AlterSyncStateSetRequestHeader("nope", 1, 1), SyncStateSet(frozenset({1}), 0),
                                     w.is_alive)
    assert other.code == C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED


def test_replica_info_and_sync_state_data(w):
    assert w.m.get_replica_info(GetReplicaInfoRequestHeader("nope")).code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    w.elect(1)
    w.alter({1, 2}, 1, 1, 1)
    w.alive.discard(3)
    r = w.m.get_replica_info(GetReplicaInfoRequestHeader(NAME))
    assert (r.header.master_broker_id, r.header.master_address, r.header.master_epoch) == (1, ADDR[1], 1)
    assert decode_sync_state_set(r.body).sync_state_set_epoch == 2
    table = decode_broker_replicas_info(w.m.get_sync_state_data([NAME, "nope"], w.is_alive).body)
    assert list(table) == [NAME]
    info = table[NAME]
    assert [(x.broker_id, x.alive) for x in info.in_sync_replicas] == [(1, True), (2, True)]
    assert [(x.broker_id, x.alive) for x in info.not_in_sync_replicas] == [(3, False)]


def test_clean_broker_data(w):
    w.elect(1)
    w.alter({1, 2}, 1, 1, 1)
    clean = w.m.clean_broker_data
    # no ids while a master is set -> 2009; a listed id still alive -> 2009; unknown set -> 2009
    assert clean(CleanControllerBrokerDataRequestHeader(CLUSTER, NAME), w.is_alive).code == 2009
    assert clean(CleanControllerBrokerDataRequestHeader(CLUSTER, NAME, "2"), w.is_alive).code == 2009
    assert clean(CleanControllerBrokerDataRequestHeader(CLUSTER, "nope", "2"), w.is_alive).code == 2009
    assert clean(CleanControllerBrokerDataRequestHeader(CLUSTER, NAME, "2;x"), w.is_alive).code == 2009
    w.alive.discard(2)
    assert w.commit(clean(CleanControllerBrokerDataRequestHeader(CLUSTER, NAME, "2"), w.is_alive)).code == 0
    assert set(w.m.replica_info[NAME].brokers) == {1, 3} and w.info.sync_state_set == {1}
    # clean living brokers: no liveness check; no ids -> the whole set goes
    assert w.commit(clean(CleanControllerBrokerDataRequestHeader(CLUSTER, NAME, None, True), w.is_alive)).code == 0
    assert not w.m.known(NAME)
    assert w.m.get_next_broker_id(GetNextBrokerIdRequestHeader(CLUSTER, NAME)).header.next_broker_id == 1


def test_scan_finds_sets_with_a_dead_master_and_a_live_replica(w):
    w.elect(1)
    assert w.m.scan_need_reelect(w.is_alive) == []
    w.alive.discard(1)
    assert w.m.scan_need_reelect(w.is_alive) == [NAME]
    w.alive.clear()
    assert w.m.scan_need_reelect(w.is_alive) == []


def test_snapshot_round_trip(w):
    w.elect(1)
    w.alter({1, 3}, 1, 1, 1)
    other = ReplicasInfoManager()
    other.restore(w.m.snapshot())
    assert other.snapshot() == w.m.snapshot()
    assert other.sync_state_info[NAME] == w.info
