"""Controller pieces: the log entry bytes (§1), the heartbeat table (§3.2), the config keys (§1)."""

from __future__ import annotations

import pytest

from broker_core.codec.errors import CodecError
from broker_core.controller.config import ControllerConfig, parse_peers
from broker_core.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    UpdateBrokerAddressEvent,
    decode_event,
    encode_event,
)
from broker_core.controller.heartbeat import BrokerHeartbeatManager


def test_event_entry_is_an_i16_id_and_fastjson():
    assert encode_event(ElectMasterEvent("b", True, 2)) == (
        b'\x00\x03{"brokerName":"b","newMasterBrokerId":2,"newMasterElected":true}')
    assert encode_event(ElectMasterEvent("b", False)) == b'\x00\x03{"brokerName":"b","newMasterElected":false}'
    assert encode_event(AlterSyncStateSetEvent("b", frozenset({2, 1}))) == (
        b'\x00\x01{"brokerName":"b","newSyncStateSet":[1,2]}')
    for event in (AlterSyncStateSetEvent("b", frozenset({1})), ApplyBrokerIdEvent("c", "b", "a:1", 3, "a:1;5"),
                  ElectMasterEvent("b", True, 1), ElectMasterEvent("b", False), CleanBrokerDataEvent("b"),
                  CleanBrokerDataEvent("b", frozenset({2, 3})), UpdateBrokerAddressEvent("c", "b", "x:2", 2)):
        assert decode_event(encode_event(event)) == event
    with pytest.raises(CodecError):
        decode_event(b"\x00\x09{}")
    with pytest.raises(CodecError):
        decode_event(b"\x00\x01{")


def test_heartbeats_expire_and_keep_the_best_epoch_offset():
    now = [1_000]
    hb = BrokerHeartbeatManager(clock=lambda: now[0])
    conn = object()
    hb.on_heartbeat("c", "b", "a:1", 1, 3000, conn, 2, 100, 90, 5)
    hb.on_heartbeat("c", "b", "a:2", 2, None, object(), None, None, None, None)
    assert hb.live_info("c", "b", 2).epoch == -1 and hb.table[("c", "b", 2)].timeout_ms == 10_000
    hb.on_heartbeat("c", "b", "a:1", 1, 3000, conn, 1, 999, 999, 7)  # lower epoch: offsets kept, priority taken
    info = hb.live_info("c", "b", 1)
    assert (info.epoch, info.max_offset, info.election_priority) == (2, 100, 7)
    hb.on_heartbeat("c", "b", "a:1", 1, 3000, conn, 2, 150, 140, 7)
    assert hb.live_info("c", "b", 1).max_offset == 150
    now[0] += 3000
    assert hb.is_alive("c", "b", 1)  # last + timeout >= now
    now[0] += 1
    assert not hb.is_alive("c", "b", 1) and hb.is_alive("c", "b", 2)
    assert [k for k, _ in hb.scan()] == [("c", "b", 1)]
    assert hb.scan() == []
    assert hb.on_channel_close(conn) == []
    other = object()
    hb.on_heartbeat("c", "b", "a:1", 1, 3000, other, 2, 150, 140, 7)
    assert hb.on_channel_close(other) == [("c", "b", 1)] and hb.live_info("c", "b", 1) is None


def test_config_keys_and_raft_ports(tmp_path):
    cfg = ControllerConfig.from_properties({
        "controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9877;n1-127.0.0.1:9868;n2-10.0.0.3:9869",
        "controllerDLegerSelfId": "n1", "enableElectUncleanMaster": "true", "scanNotActiveBrokerInterval": "2000",
        "processReadEvent": "true", "listenPort": "9876"})
    cfg.validate()
    assert cfg.enable_elect_unclean_master and cfg.process_read_event and cfg.scan_not_active_broker_interval_ms == 2000
    assert cfg.self_addr() == "127.0.0.1:9868"
    assert cfg.raft_peers() == [("n0", "127.0.0.1:10877"), ("n1", "127.0.0.1:10868"), ("n2", "10.0.0.3:10869")]
    assert cfg.notify_broker_role_changed and cfg.scan_inactive_master_interval_ms == 5000
    cfg.update({"controllerRaftPeers": "n0-h:1;n1-h:2;n2-h:3"})
    assert cfg.raft_peers()[1] == ("n1", "h:2")
    assert "configStorePath" in cfg.black_list() and "rocketmqHome" in cfg.black_list()
    with pytest.raises(ValueError, match="controllerRaftPeers"):
        ControllerConfig.from_properties({"controllerDLegerPeers": "n0-h:1", "controllerDLegerSelfId": "n0",
                                          "controllerRaftPeers": "x-h:2"}).validate()
    with pytest.raises(ValueError, match="controllerDLegerSelfId"):
        ControllerConfig.from_properties({"controllerDLegerPeers": "n0-h:1", "controllerDLegerSelfId": "n5"}).validate()
    with pytest.raises(ValueError, match="scanNotActiveBrokerInterval"):
        ControllerConfig.from_properties({"scanNotActiveBrokerInterval": "soon"})
    with pytest.raises(ValueError, match="id-host:port"):
        parse_peers("n0:127.0.0.1", "controllerDLegerPeers")
