"""RouteInfoManager: registration, route shape, master-only queue data, replacement, unregister, expiry."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from broker_core.namesrv import DEFAULT_PERM, PERM_INHERIT, PERM_READ, PERM_WRITE, NamesrvController, RouteInfoManager
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.store.clock import ManualClock

A0 = "10.0.0.1:10911"
A1 = "10.0.0.2:10911"
B0 = "10.0.0.3:10911"


def cfg(read: int = 4, write: int = 4, perm: int = 6) -> dict[str, int]:
    return {"readQueueNums": read, "writeQueueNums": write, "perm": perm}


def qd(name: str, read: int = 4, write: int = 4, perm: int = 6, sys_flag: int = 0) -> dict[str, object]:
    """RocketMQ's QueueData, the flag under its 4.9 name and the 4.8 name client-go still reads."""
    return {"brokerName": name, "readQueueNums": read, "writeQueueNums": write, "perm": perm,
            "topicSysFlag": sys_flag, "topicSynFlag": sys_flag}


@pytest.fixture
def routes(clock: ManualClock) -> RouteInfoManager:
    return RouteInfoManager(clock)


def test_perm_constants():
    assert (PERM_READ, PERM_WRITE, PERM_INHERIT, DEFAULT_PERM) == (4, 2, 1, 6)


def test_register_and_route_shape(routes):
    routes.register_broker("DefaultCluster", "broker-a", 0, A0, {"orders": cfg(8, 4, 6)})
    route = routes.pickup_topic_route("orders")
    assert route == {
        "queueDatas": [qd("broker-a", 8, 4, 6)],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": A0}}],
        "filterServerTable": {},
    }
    assert json.loads(json.dumps(route)) == route  # JSON-ready as is
    assert routes.topic_list() == ["orders"]


def test_route_spans_brokers_in_name_order(routes):
    routes.register_broker("c", "broker-b", 0, B0, {"t": cfg(2, 2)})
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg(4, 4)})
    route = routes.pickup_topic_route("t")
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a", "broker-b"]


def test_unknown_topic_has_no_route(routes):
    assert routes.pickup_topic_route("nope") is None
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()})
    assert routes.pickup_topic_route("nope") is None


def test_only_the_master_sets_queue_data(routes):
    routes.register_broker("c", "broker-a", 1, A1, {"t": cfg()})
    assert routes.pickup_topic_route("t") is None  # a slave alone publishes no queues
    assert routes.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"1": A1}
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg(4, 4)})
    routes.register_broker("c", "broker-a", 1, A1, {"t": cfg(16, 16), "slave-only": cfg()})
    route = routes.pickup_topic_route("t")
    assert route["queueDatas"] == [qd("broker-a")]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": A0, "1": A1}
    assert routes.topic_list() == ["t"]


def test_slave_learns_a_live_master(routes):
    assert routes.register_broker("c", "broker-a", 1, A1, {}) is None
    routes.register_broker("c", "broker-a", 0, A0, {})
    assert routes.register_broker("c", "broker-a", 1, A1, {}) == A0


def test_reregister_replaces_the_topic_set(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"keep": cfg(), "drop": cfg(), "shared": cfg()})
    routes.register_broker("c", "broker-b", 0, B0, {"shared": cfg()})
    routes.register_broker("c", "broker-a", 0, A0, {"keep": cfg(8, 8, 4), "new": cfg()})
    assert routes.topic_list() == ["keep", "new", "shared"]
    assert routes.pickup_topic_route("drop") is None
    assert [q["brokerName"] for q in routes.pickup_topic_route("shared")["queueDatas"]] == ["broker-b"]
    assert routes.pickup_topic_route("keep")["queueDatas"][0] == qd("broker-a", 8, 8, 4)


def test_bad_topic_config_changes_nothing(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()})
    for table in ({"bad topic": cfg()}, {"t2": {"readQueueNums": -1, "writeQueueNums": 1}},
                  {"t2": {"readQueueNums": 1, "writeQueueNums": "1"}}, {"t2": cfg(perm=16)}, {"t2": []}):
        with pytest.raises(ValueError):
            routes.register_broker("c", "broker-a", 0, A0, table)
    assert routes.topic_list() == ["t"]


def test_unregister_cascades(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()})
    routes.register_broker("c", "broker-a", 1, A1, {})
    routes.register_broker("c", "broker-b", 0, B0, {"t": cfg(), "only-b": cfg()})
    assert routes.unregister_broker("c", "broker-a", 0, A0)
    # the slave keeps broker-a (and its queues) alive, as upstream
    assert [q["brokerName"] for q in routes.pickup_topic_route("t")["queueDatas"]] == ["broker-a", "broker-b"]
    assert routes.unregister_broker("c", "broker-a", 1, A1)
    assert [q["brokerName"] for q in routes.pickup_topic_route("t")["queueDatas"]] == ["broker-b"]
    info = routes.cluster_info()
    assert list(info["brokerAddrTable"]) == ["broker-b"]
    assert info["clusterAddrTable"] == {"c": ["broker-b"]}
    assert list(routes.live_table()) == [B0]
    assert routes.unregister_broker("c", "broker-b", 0, B0)
    assert routes.topic_list() == []
    assert routes.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert not routes.unregister_broker("c", "broker-b", 0, B0)


def test_stale_unregister_does_not_remove_the_replacement(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()})
    routes.register_broker("c", "broker-a", 0, A1, {"t": cfg()})  # restarted on another address
    assert list(routes.live_table()) == [A1]
    assert not routes.unregister_broker("c", "broker-a", 0, A0)
    assert routes.pickup_topic_route("t")["brokerDatas"][0]["brokerAddrs"] == {"0": A1}


def test_role_switch_removes_the_old_id(routes):
    routes.register_broker("c", "broker-a", 1, A1, {})
    routes.register_broker("c", "broker-a", 0, A1, {"t": cfg()})
    assert routes.pickup_topic_route("t")["brokerDatas"][0]["brokerAddrs"] == {"0": A1}


def test_expiry_after_120s_without_heartbeat(routes, clock):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg()})
    routes.register_broker("c", "broker-b", 0, B0, {"t": cfg()})
    clock.advance(120_000)
    assert routes.scan_not_active_broker(clock.now_ms()) == []  # exactly 120 s is not yet expired
    routes.register_broker("c", "broker-b", 0, B0, {"t": cfg()})  # fresh heartbeat
    clock.advance(1)
    assert routes.scan_not_active_broker(clock.now_ms(), 120_000) == [A0]
    assert [q["brokerName"] for q in routes.pickup_topic_route("t")["queueDatas"]] == ["broker-b"]
    assert list(routes.cluster_info()["brokerAddrTable"]) == ["broker-b"]
    clock.advance(119_000)
    assert routes.scan_not_active_broker(clock.now_ms()) == []
    clock.advance(1_001)
    assert routes.scan_not_active_broker(clock.now_ms()) == [B0]
    assert routes.pickup_topic_route("t") is None
    assert routes.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_custom_expiry_uses_the_clock_by_default(routes, clock):
    routes.register_broker("c", "broker-a", 0, A0, {})
    clock.advance(1_001)
    assert routes.scan_not_active_broker(expire_ms=1_000) == [A0]


def test_cluster_info(routes, clock):
    routes.register_broker("c1", "broker-a", 0, A0, {})
    clock.advance(5)
    routes.register_broker("c1", "broker-a", 1, A1, {})
    routes.register_broker("c2", "broker-b", 0, B0, {})
    info = routes.cluster_info()
    assert info["clusterAddrTable"] == {"c1": ["broker-a"], "c2": ["broker-b"]}
    assert info["brokerAddrTable"]["broker-a"] == {"cluster": "c1", "brokerName": "broker-a",
                                                   "brokerAddrs": {"0": A0, "1": A1}}
    start = clock.now_ms() - 5
    assert set(info) == {"brokerAddrTable", "clusterAddrTable"}  # RocketMQ's ClusterInfo, nothing else
    assert routes.live_table() == {A0: start, A1: start + 5, B0: start + 5}


def test_moving_a_broker_to_another_cluster(routes):
    routes.register_broker("c1", "broker-a", 0, A0, {})
    routes.register_broker("c2", "broker-a", 0, A0, {})
    info = routes.cluster_info()
    assert info["clusterAddrTable"] == {"c2": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["cluster"] == "c2"


def test_delete_topic(routes):
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg(), "u": cfg()})
    assert routes.delete_topic("t")
    assert not routes.delete_topic("t")
    assert routes.topic_list() == ["u"]
    assert routes.pickup_topic_route("t") is None
    routes.register_broker("c", "broker-a", 0, A0, {"t": cfg(), "u": cfg()})  # the broker still has it
    assert routes.topic_list() == ["t", "u"]


def test_concurrent_registration(routes):
    def worker(i: int) -> None:
        for n in range(50):
            routes.register_broker("c", f"broker-{i}", 0, f"10.1.0.{i}:{10000 + n % 3}", {f"t{n % 5}": cfg()})
            routes.pickup_topic_route(f"t{n % 5}")
            routes.cluster_info()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = routes.cluster_info()
    assert sorted(info["clusterAddrTable"]["c"]) == [f"broker-{i}" for i in range(8)]
    assert len(routes.live_table()) == 8  # an id that moved address took its live entry along


# -- handlers (no sockets: called directly) --------------------------------------------------------------------


def call(controller: NamesrvController, code: int, header: dict | None = None, body: bytes = b"") -> RemotingCommand:
    handler = controller.remoting.handlers[code]
    conn = SimpleNamespace(remote="127.0.0.1:50000")  # handlers only read the peer address
    return handler(RemotingCommand.request(code, header, body), conn)  # type: ignore[arg-type, return-value]


def broker_header(**overrides: object) -> dict:
    return {"clusterName": "c", "brokerName": "broker-a", "brokerId": 0, "brokerAddr": A0, **overrides}


def test_handlers_topic_not_exist_and_bad_requests(clock):
    ctl = NamesrvController(clock=clock)
    resp = call(ctl, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "missing"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == "No topic route info in name server for the topic: missing"
    resp = call(ctl, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "bad topic!"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "may only contain" in resp.remark
    assert call(ctl, RequestCode.GET_ROUTEINFO_BY_TOPIC, {}).code == ResponseCode.SYSTEM_ERROR
    for field, value in (("clusterName", None), ("brokerName", ""), ("brokerId", -1), ("brokerId", True),
                         ("brokerAddr", "nohost"), ("brokerAddr", 5)):
        header = broker_header(**{field: value}) if value is not None else {
            k: v for k, v in broker_header().items() if k != field}
        for code in (RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER):
            resp = call(ctl, code, header)
            assert resp.code == ResponseCode.SYSTEM_ERROR and field in resp.remark, (field, value, resp)
    for body in (b"{", b"[]", b'{"topicConfigTable": []}', b'{"topicConfigTable": {"t": {"readQueueNums": 1}}}'):
        resp = call(ctl, RequestCode.REGISTER_BROKER, broker_header(), body)
        assert resp.code == ResponseCode.SYSTEM_ERROR, body
    assert ctl.routes.cluster_info()["brokerAddrTable"] == {}
    resp = call(ctl, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": ""})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark


def test_handlers_round_trip(clock):
    ctl = NamesrvController(clock=clock)
    body = json.dumps({"topicConfigTable": {"b": cfg(), "a": cfg(2, 2, 4)}}).encode()
    assert call(ctl, RequestCode.REGISTER_BROKER, broker_header(brokerId="0"), body).code == ResponseCode.SUCCESS
    resp = call(ctl, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "a"})
    assert resp.code == ResponseCode.SUCCESS
    assert json.loads(resp.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A0}
    resp = call(ctl, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert json.loads(resp.body) == {"topicList": ["a", "b"]}
    resp = call(ctl, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert json.loads(resp.body) == {"brokerAddrTable": {"broker-a": {
        "brokerAddrs": {"0": A0}, "brokerName": "broker-a", "cluster": "c"}}, "clusterAddrTable": {"c": ["broker-a"]}}
    assert call(ctl, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "a"}).code == ResponseCode.SUCCESS
    assert call(ctl, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "a"}).code == ResponseCode.TOPIC_NOT_EXIST
    assert call(ctl, RequestCode.UNREGISTER_BROKER, broker_header()).code == ResponseCode.SUCCESS
    assert json.loads(call(ctl, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body) == {"topicList": []}
    clock.advance(1)
    assert ctl.scan_once() == []
