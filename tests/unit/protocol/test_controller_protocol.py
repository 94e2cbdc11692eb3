"""Controller mode on the wire (reference rocketmq-controller.md §2): codes, header field names, and the bodies
as fastjson writes them (texts written here from the reference and the Java classes, not from our encoder)."""

from __future__ import annotations

import pytest

from broker_core.errors import BadRequest
from broker_core.protocol import FrameDecoder, RemotingCommand
from broker_core.protocol.controller import (
    JAVA_LONG_MAX,
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    AlterSyncStateSetRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerMemberGroup,
    CleanControllerBrokerDataRequestHeader,
    ControllerRequestCode,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    EpochEntry,
    EpochEntryCache,
    GetMetaDataResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    ReplicaIdentity,
    ReplicasInfo,
    decode_broker_names,
    decode_broker_replicas_info,
    decode_elect_master_body,
    decode_epoch_entry_cache,
    decode_sync_state_set,
    encode_broker_names,
    encode_broker_replicas_info,
    encode_elect_master_body,
    encode_epoch_entry_cache,
    encode_sync_state_set,
    format_peers,
    header_fields,
    parse_id_list,
)


def test_codes_are_rocketmq_5s():
    assert ControllerRequestCode.BROKER_HEARTBEAT == 904
    assert [c.value for c in ControllerRequestCode][1:] == list(range(1001, 1014))
    assert ControllerRequestCode.GET_BROKER_EPOCH_CACHE == 1007
    assert ControllerRequestCode.CLEAN_BROKER_DATA == 1011
    assert [c.value for c in ControllerResponseCode] == list(range(2000, 2017))
    assert ControllerResponseCode.CONTROLLER_NOT_LEADER == 2007
    assert ControllerResponseCode.CONTROLLER_MASTER_STILL_EXIST == 2011
    assert set(REQUEST_HEADERS) == set(RESPONSE_HEADERS) == set(ControllerRequestCode)


@pytest.mark.parametrize(("cls", "names"), [
    (BrokerHeartbeatRequestHeader, ("clusterName", "brokerAddr", "brokerName", "brokerId", "epoch", "maxOffset",
                                    "confirmOffset", "heartbeatTimeoutMills", "electionPriority")),
    (AlterSyncStateSetRequestHeader, ("brokerName", "masterBrokerId", "masterEpoch", "invokeTime")),
    (ElectMasterRequestHeader, ("clusterName", "brokerName", "brokerId", "designateElect", "invokeTime")),
    (GetMetaDataResponseHeader, ("group", "controllerLeaderId", "controllerLeaderAddress", "isLeader", "peers")),
    (NotifyBrokerRoleChangedRequestHeader, ("masterAddress", "masterEpoch", "syncStateSetEpoch", "masterBrokerId")),
    (CleanControllerBrokerDataRequestHeader, ("clusterName", "brokerName", "brokerControllerIdsToClean",
                                              "isCleanLivingBroker", "invokeTime")),
])
def test_header_field_names_are_the_java_fields(cls, names):
    assert header_fields(cls) == names


def test_header_round_trip_through_a_frame():
    h = ElectMasterRequestHeader("c", "b", 2, True, 1700000000000)
    assert h.to_ext() == {"clusterName": "c", "brokerName": "b", "brokerId": "2", "designateElect": "true",
                          "invokeTime": "1700000000000"}
    cmd = RemotingCommand.request(ControllerRequestCode.CONTROLLER_ELECT_MASTER, h.to_ext())
    (back,) = FrameDecoder().feed(cmd.encode())
    assert ElectMasterRequestHeader.from_ext(back.header) == h


def test_header_decode_defaults_nulls_and_errors():
    h = BrokerHeartbeatRequestHeader.from_ext({"clusterName": "c", "brokerAddr": "a:1", "brokerName": "b"})
    assert (h.broker_id, h.epoch, h.heartbeat_timeout_mills) == (None, None, None)
    assert "brokerId" not in h.to_ext()
    with pytest.raises(BadRequest, match="brokerAddr"):
        BrokerHeartbeatRequestHeader.from_ext({"clusterName": "c", "brokerName": "b"})
    with pytest.raises(BadRequest, match="epoch"):
        BrokerHeartbeatRequestHeader.from_ext({"clusterName": "c", "brokerAddr": "a", "brokerName": "b",
                                               "epoch": "x"})
    # a required field with a Java default keeps it when absent (Java: constructor, then checkFields)
    assert ElectMasterRequestHeader.from_ext({"brokerName": "b"}) == ElectMasterRequestHeader("", "b", -1, False)
    with pytest.raises(BadRequest, match="brokerName"):
        CleanControllerBrokerDataRequestHeader.from_ext({"clusterName": "c"})
    meta = GetMetaDataResponseHeader.from_ext({"isLeader": "true", "group": "g"})
    assert meta.is_leader is True and meta.peers is None


def test_sync_state_set_body():
    assert encode_sync_state_set({2, 1}, 3) == b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    sss = decode_sync_state_set(b'{"syncStateSet":[3,1],"syncStateSetEpoch":7}')
    assert sss.sync_state_set == {1, 3} and sss.sync_state_set_epoch == 7
    with pytest.raises(BadRequest):
        decode_sync_state_set(b"{nope")


def test_elect_master_body_has_bare_integer_keys():
    group = BrokerMemberGroup("DefaultCluster", "broker-a", {2: "127.0.0.1:30931", 1: "127.0.0.1:30911"})
    raw = encode_elect_master_body({2}, group)
    assert raw == (b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30931"},'
                   b'"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}')
    back = decode_elect_master_body(raw)
    assert back.broker_member_group == group and back.sync_state_set == {2}
    assert decode_elect_master_body(b'{"syncStateSet":[1]}').broker_member_group is None
    # quoted keys (another JSON writer) read the same
    q = decode_elect_master_body(b'{"brokerMemberGroup":{"brokerAddrs":{"1":"x:1"},"brokerName":"b",'
                                 b'"cluster":"c"},"syncStateSet":[1]}')
    assert q.broker_member_group is not None and q.broker_member_group.broker_addrs == {1: "x:1"}


def test_broker_replicas_info_body():
    info = ReplicasInfo(1, "127.0.0.1:30911", 2, 3,
                        (ReplicaIdentity("broker-a", 1, "127.0.0.1:30911", True),),
                        (ReplicaIdentity("broker-a", 2, "127.0.0.1:30931", False),))
    raw = encode_broker_replicas_info({"broker-a": info})
    assert raw == (b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,'
                   b'"brokerAddress":"127.0.0.1:30911","brokerId":1,"brokerName":"broker-a"}],'
                   b'"masterAddress":"127.0.0.1:30911","masterBrokerId":1,"masterEpoch":2,"notInSyncReplicas":'
                   b'[{"alive":false,"brokerAddress":"127.0.0.1:30931","brokerId":2,"brokerName":"broker-a"}],'
                   b'"syncStateSetEpoch":3}}}')
    assert decode_broker_replicas_info(raw) == {"broker-a": info}
    no_master = ReplicasInfo(None, None, 4, 3)
    assert decode_broker_replicas_info(encode_broker_replicas_info({"b": no_master})) == {"b": no_master}


def test_broker_names_body():
    assert encode_broker_names(["a", "b"]) == b'["a","b"]'
    assert decode_broker_names(b'["a","b"]') == ["a", "b"] and decode_broker_names(b"") == []


def test_epoch_entry_cache_body():
    cache = EpochEntryCache("c", "broker-a", 0, (EpochEntry(1, 0, 7000), EpochEntry(2, 7000)), 9000)
    raw = encode_epoch_entry_cache(cache)
    assert raw == (b'{"brokerId":0,"brokerName":"broker-a","clusterName":"c","epochList":[{"endOffset":7000,'
                   b'"epoch":1,"startOffset":0},{"endOffset":9223372036854775807,"epoch":2,"startOffset":7000}],'
                   b'"maxOffset":9000}')
    assert decode_epoch_entry_cache(raw) == cache
    assert cache.epoch_list[-1].end_offset == JAVA_LONG_MAX


def test_peers_and_id_lists():
    assert format_peers([("n0", "127.0.0.1:9878"), ("n1", "127.0.0.1:9868")]) == "n0:127.0.0.1:9878;n1:127.0.0.1:9868;"
    assert parse_id_list("1;2;3") == {1, 2, 3} and parse_id_list(None) == set() and parse_id_list("") == set()
    with pytest.raises(BadRequest):
        parse_id_list("1;x")
