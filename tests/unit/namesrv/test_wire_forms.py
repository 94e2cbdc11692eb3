"""RocketMQ 4.9 name-server semantics without sockets: dataVersion gating, write-perm wipe/add, delete by
cluster, system/unit topic lists, KV namespaces, and the SDK's readers of route/cluster bodies in both the
quoted (4.9.4+) and fastjson-native (bare integer keys) forms."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker_core.client.instance import TopicRoute, decode_cluster_info, decode_route
from broker_core.client.message import MessageQueue
from broker_core.namesrv import NamesrvController, RouteInfoManager
from broker_core.namesrv.kv_config import KVConfigManager
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.store.clock import ManualClock

A0 = "10.0.0.1:10911"
A1 = "10.0.0.2:10911"
B0 = "10.0.0.3:10911"


def cfg(read: int = 4, write: int = 4, perm: int = 6, sys_flag: int = 0) -> dict[str, int]:
    return {"readQueueNums": read, "writeQueueNums": write, "perm": perm, "topicSysFlag": sys_flag}


def v(counter: int, ts: int = 1700000000000) -> dict[str, int]:
    return {"counter": counter, "timestamp": ts}


@pytest.fixture
def routes(clock: ManualClock) -> RouteInfoManager:
    return RouteInfoManager(clock)


def test_same_data_version_does_not_reread_topics(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()}, data_version=v(1))
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg(8, 8), "u": cfg()}, data_version=v(1))
    assert routes.topic_list() == ["t"]
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg(8, 8), "u": cfg()}, data_version=v(1, 1))  # timestamp
    assert routes.topic_list() == ["t", "u"]
    # fastjson may give the counter as text; the same version is still the same
    routes.register_broker("c", "broker-a", 0, A0, {}, data_version={"counter": "1", "timestamp": 1})
    assert routes.topic_list() == ["t", "u"]
    # no dataVersion at all always counts as changed (Java's default DataVersion has a fresh timestamp)
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()})
    assert routes.topic_list() == ["t"]


def test_first_registration_reads_topics_even_with_a_known_version(routes, clock):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()}, data_version=v(3))
    assert routes.unregister_broker("c", "broker-a", 0, A0)
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()}, data_version=v(3))
    assert routes.topic_list() == ["t"]
    clock.advance(200_000)
    assert routes.scan_not_active_broker() == [A0]
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()}, data_version=v(3))
    assert routes.topic_list() == ["t"]


def test_query_data_version_refreshes_only_when_unchanged(routes, clock):
    routes.register_broker("c", "broker-a", 0, A0, {}, data_version=v(2))
    start = clock.now_ms()
    clock.advance(10)
    assert routes.query_data_version(A0, v(3)) == (True, v(2))
    assert routes.live_table()[A0] == start
    assert routes.query_data_version(A0, v(2)) == (False, v(2))
    assert routes.live_table()[A0] == start + 10
    assert routes.query_data_version(B0, v(2)) == (True, None)


def test_write_perm_wipe_and_add_as_upstream(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"rw": cfg(), "ro": cfg(perm=4), "inh": cfg(perm=7)})
    routes.register_broker("c", "broker-b", 0, B0, {"rw": cfg()})
    assert routes.change_write_perm("broker-a", writable=False) == 3
    perms = {t: routes.pickup_topic_route(t)["queueDatas"][0]["perm"] for t in ("rw", "ro", "inh")}
    assert perms == {"rw": 4, "ro": 4, "inh": 5}
    assert routes.pickup_topic_route("rw")["queueDatas"][1]["perm"] == 6  # broker-b untouched
    assert routes.change_write_perm("broker-a", writable=True) == 3
    perms = {t: routes.pickup_topic_route(t)["queueDatas"][0]["perm"] for t in ("rw", "ro", "inh")}
    assert perms == {"rw": 6, "ro": 6, "inh": 6}  # PERM_READ | PERM_WRITE, whatever it was
    assert routes.change_write_perm("nobody", writable=True) == 0


def test_delete_topic_in_one_cluster(routes):
    routes.register_broker("c1", "broker-a", 0, A0, {"t": cfg()})
    routes.register_broker("c2", "broker-b", 0, B0, {"t": cfg(), "only-b": cfg()})
    assert not routes.delete_topic("t", "nope")
    assert routes.delete_topic("t", "c2")
    assert [q["brokerName"] for q in routes.pickup_topic_route("t")["queueDatas"]] == ["broker-a"]
    assert routes.delete_topic("only-b", "c2")
    assert routes.topic_list() == ["t"]
    assert routes.delete_topic("t", "c1")
    assert routes.topic_list() == []


def test_system_and_unit_topic_lists(routes):
    assert routes.system_topic_list() == {"topicList": []}  # no brokerAddr without brokers
    routes.register_broker("c2", "broker-b", 1, A1, {})
    assert routes.system_topic_list() == {"topicList": ["c2", "broker-b"], "brokerAddr": A1}  # any address
    routes.register_broker("c1", "broker-a", 0, A0, {"plain": cfg(), "unit": cfg(sys_flag=1),
                                                     "sub": cfg(sys_flag=2), "both": cfg(sys_flag=3)})
    assert routes.system_topic_list() == {"topicList": ["c1", "broker-a", "c2", "broker-b"], "brokerAddr": A0}
    assert routes.topics_by_sys_flag(lambda f: bool(f & 1)) == ["both", "unit"]
    assert routes.topics_by_sys_flag(lambda f: bool(f & 2) and not f & 1) == ["sub"]


def test_kv_namespace_survives_its_last_key(tmp_path: Path):
    kv = KVConfigManager(tmp_path / "kvConfig.json")
    assert kv.namespace("ns") is None
    kv.put("ns", "k", "v")
    kv.delete("ns", "k")
    assert kv.namespace("ns") == {}  # upstream keeps the emptied map: GET_KVLIST answers {"table":{}}
    assert KVConfigManager(tmp_path / "kvConfig.json").namespace("ns") == {}


# -- handlers called directly --------------------------------------------------------------------------------


def call(ctl: NamesrvController, code: int, header: dict | None = None, body: bytes = b"") -> RemotingCommand:
    conn = SimpleNamespace(remote="127.0.0.1:50000")
    return ctl.remoting.handlers[code](RemotingCommand.request(code, header, body), conn)  # type: ignore[arg-type, return-value]


def register_header(body: bytes, **overrides: object) -> dict[str, object]:
    return {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "c", "haServerAddr": "", "brokerId": "0",
            "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF), **overrides}


def test_register_handler_crc_and_bodies(clock):
    ctl = NamesrvController(clock=clock)
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": v(1), "topicConfigTable": {"T": {"topicName": "T", **cfg()}}}}).encode()
    bad = call(ctl, RequestCode.REGISTER_BROKER, register_header(body, bodyCrc32="12345"), body)
    assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    bad = call(ctl, RequestCode.REGISTER_BROKER, register_header(body, bodyCrc32="x"), body)
    assert bad.code == ResponseCode.SYSTEM_ERROR and "bodyCrc32" in bad.remark
    assert ctl.routes.topic_list() == []
    assert call(ctl, RequestCode.REGISTER_BROKER, register_header(body), body).code == ResponseCode.SUCCESS
    assert ctl.routes.topic_list() == ["T"]
    # the bare TopicConfigSerializeWrapper older brokers send, and null tables
    for raw in (b'{"dataVersion":{"counter":2,"timestamp":0},"topicConfigTable":{"W":{"readQueueNums":1,'
                b'"writeQueueNums":1,"perm":6}}}',):
        assert call(ctl, RequestCode.REGISTER_BROKER, register_header(raw), raw).code == ResponseCode.SUCCESS
    assert ctl.routes.topic_list() == ["W"]
    raw = b'{"filterServerList":null,"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":0},' \
          b'"topicConfigTable":null}}'
    assert call(ctl, RequestCode.REGISTER_BROKER, register_header(raw), raw).code == ResponseCode.SUCCESS
    assert ctl.routes.topic_list() == []


def test_register_handler_compressed_body_errors(clock):
    ctl = NamesrvController(clock=clock)
    for body in (b"not zlib", zlib.compress(b"\x00\x00\x00\x05{}"),
                 zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 3) + b"a b")):
        resp = call(ctl, RequestCode.REGISTER_BROKER, register_header(body, compressed="true"), body)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "compressed" in resp.remark, resp.remark


def test_route_body_escapes_non_ascii_as_browser_compatible(clock):
    ctl = NamesrvController(clock=clock, order_message_enable=True)
    ctl.routes.register_broker("c", "broker-a", 0, A0, {"T": cfg()})
    ctl.kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4;brökér:2")
    body = call(ctl, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body
    assert body.isascii() and b'"orderTopicConf":"broker-a:4;br\\u00f6k\\u00e9r:2"' in body
    assert list(json.loads(body)) == ["brokerDatas", "filterServerTable", "orderTopicConf", "queueDatas"]  # sorted


# -- the SDK's readers ------------------------------------------------------------------------------------------


def test_sdk_reads_native_fastjson_route_and_cluster_bodies():
    native_route = (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
                    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
                    b'"perm":6,"readQueueNums":2,"topicSynFlag":0,"writeQueueNums":2}]}')
    route = decode_route(native_route)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": A0, "1": A1}
    tr = TopicRoute.from_wire("T", route)
    assert tr.write_queues == [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]
    assert decode_route(native_route.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')) == route

    native_info = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
                   b'"cluster":"c"}},"clusterAddrTable":{"c":["broker-a"]}}')
    assert decode_cluster_info(native_info) == {
        "brokerAddrTable": {"broker-a": {"brokerAddrs": {"0": A0}, "brokerName": "broker-a", "cluster": "c"}},
        "clusterAddrTable": {"c": ["broker-a"]}}
    with pytest.raises(ValueError):
        decode_route(b"[]")


def test_sdk_publishes_to_order_topic_conf_queues():
    data = {"brokerDatas": [{"brokerAddrs": {"0": A0}, "brokerName": "broker-a", "cluster": "c"},
                            {"brokerAddrs": {"0": B0}, "brokerName": "broker-b", "cluster": "c"}],
            "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "writeQueueNums": 8},
                           {"brokerName": "broker-b", "perm": 6, "readQueueNums": 8, "writeQueueNums": 8}],
            "orderTopicConf": "broker-b:2;broker-a:1"}
    route = TopicRoute.from_wire("T", data)
    assert route.write_queues == [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-b", 1),
                                  MessageQueue("T", "broker-a", 0)]
    assert len(route.read_queues) == 16  # subscription still follows queueDatas, as the Java client
