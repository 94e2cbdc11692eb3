"""The name server as Java and Go brokers, clients and admin tools drive it (reference §2.2, §5.2, §8.5): JSON
headers with string values, ``RegisterBrokerBody`` with ``bodyCrc32``, KV config, permissions, topic lists,
data versions; answers checked byte for byte where clients parse them by hand."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path

from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient, run_sync
from tests.integration.test_namesrv import Namesrv, client, start_namesrv  # noqa: F401 (fixtures)

TOPIC = {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
         "writeQueueNums": 4}


def call(client: RemotingClient, srv: Namesrv, code: int, header: dict[str, object] | None = None,  # noqa: F811
         body: bytes = b"") -> RemotingCommand:
    cmd = RemotingCommand.request(code, {k: str(v) for k, v in (header or {}).items()}, body)
    cmd.serialize_type = SERIALIZE_JSON
    return run_sync(client.invoke(srv.addr, cmd, timeout=10.0), 30)


def java_register(client: RemotingClient, srv: Namesrv, name: str, addr: str, broker_id: int = 0,  # noqa: F811
                  topics: dict[str, dict[str, object]] | None = None, crc: int | None = None,
                  ha: str = "", counter: int = 1) -> RemotingCommand:
    """REGISTER_BROKER exactly as BrokerOuterAPI sends it (fastjson compact body, masked CRC32)."""
    table = {t: {**TOPIC, "topicName": t, **cfg} for t, cfg in (topics or {}).items()}
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "timestamp": 1700000000000}, "topicConfigTable": table}},
        separators=(",", ":")).encode()
    return call(client, srv, RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster", "haServerAddr": ha,
        "brokerId": broker_id, "compressed": "false",
        "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc}, body)


def test_registration_and_route_body(start_namesrv: Callable[..., Namesrv], client: RemotingClient) -> None:  # noqa: F811
    srv = start_namesrv()
    resp = java_register(client, srv, "broker-a", "127.0.0.1:10911", topics={"T": {"topicSysFlag": 3}})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert "masterAddr" not in resp.header and resp.body == b""  # a master; no ORDER_TOPIC_CONFIG keys
    route = call(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert route.code == ResponseCode.SUCCESS
    text = route.body.decode()
    assert '"brokerAddrs":{"0":"127.0.0.1:10911"}' in text and " " not in text  # Go splits it by hand
    doc = json.loads(text)
    assert doc["filterServerTable"] == {} and "orderTopicConf" not in doc
    assert doc["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSynFlag": 3,
                                  "topicSysFlag": 3, "writeQueueNums": 4}]
    assert call(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}).code == ResponseCode.TOPIC_NOT_EXIST
    bad = java_register(client, srv, "broker-a", "127.0.0.1:10911", topics={"X": {}}, crc=12345)
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == "crc32 not match"
    assert call(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}).code == ResponseCode.TOPIC_NOT_EXIST
    # bodyCrc32 0 means unchecked, as Java
    assert java_register(client, srv, "broker-a", "127.0.0.1:10911", topics={"T": {}}, crc=0).code == 0


def test_slave_is_told_its_master(start_namesrv: Callable[..., Namesrv], client: RemotingClient) -> None:  # noqa: F811
    srv = start_namesrv()
    assert java_register(client, srv, "broker-a", "127.0.0.1:10911", ha="127.0.0.1:10912").code == 0
    resp = java_register(client, srv, "broker-a", "127.0.0.1:20911", broker_id=1)
    assert resp.code == ResponseCode.SUCCESS
    assert (resp.header["masterAddr"], resp.header["haServerAddr"]) == ("127.0.0.1:10911", "127.0.0.1:10912")
    info = json.loads(call(client, srv, RequestCode.GET_BROKER_CLUSTER_INFO).body)
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:20911"}
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}


def test_kv_config(start_namesrv: Callable[..., Namesrv], client: RemotingClient, tmp_path: Path) -> None:  # noqa: F811
    kv_path = tmp_path / "kvConfig.json"
    srv = start_namesrv("--kv-config-path", str(kv_path), "--order-message-enable")
    missing = call(client, srv, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert call(client, srv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}).code == 22
    assert call(client, srv, RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v1"}).code == 0
    assert call(client, srv, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}).header["value"] == "v1"
    listed = call(client, srv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert json.loads(listed.body) == {"table": {"k": "v1"}}
    assert call(client, srv, RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == 0
    assert call(client, srv, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == 22
    # ORDER_TOPIC_CONFIG: returned to registering brokers and, with orderMessageEnable, in routes
    call(client, srv, RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T",
                                                  "value": "broker-a:4"})
    resp = java_register(client, srv, "broker-a", "127.0.0.1:10911", topics={"T": {}})
    assert json.loads(resp.body) == {"table": {"T": "broker-a:4"}}
    route = json.loads(call(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route["orderTopicConf"] == "broker-a:4"
    assert "ORDER_TOPIC_CONFIG" in kv_path.read_text()  # kept as RocketMQ's kvConfig.json


def test_perms_lists_and_data_version(start_namesrv: Callable[..., Namesrv], client: RemotingClient) -> None:  # noqa: F811
    srv = start_namesrv()
    java_register(client, srv, "broker-a", "127.0.0.1:10911", topics={"T1": {}, "T2": {}}, counter=5)
    wiped = call(client, srv, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert wiped.code == 0 and wiped.header["wipeTopicCount"] == "2"
    queue = json.loads(call(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}).body)["queueDatas"][0]
    assert queue["perm"] == 4  # read only: producers skip it
    added = call(client, srv, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert added.header["addTopicCount"] == "2"
    assert json.loads(call(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                           {"topic": "T1"}).body)["queueDatas"][0]["perm"] == 6
    by_cluster = json.loads(call(client, srv, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}).body)
    assert by_cluster == {"topicList": ["T1", "T2"]}
    system = json.loads(call(client, srv, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS).body)
    assert system == {"topicList": ["DefaultCluster", "broker-a"], "brokerAddr": "127.0.0.1:10911"}
    assert json.loads(call(client, srv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body) == {
        "topicList": ["T1", "T2"]}
    header = {"brokerAddr": "127.0.0.1:10911", "brokerName": "broker-a", "clusterName": "DefaultCluster",
              "brokerId": 0}
    same = call(client, srv, RequestCode.QUERY_DATA_VERSION, header,
                b'{"counter":5,"timestamp":1700000000000}')
    assert same.header["changed"] == "false" and json.loads(same.body)["counter"] == 5
    newer = call(client, srv, RequestCode.QUERY_DATA_VERSION, header, b'{"counter":6,"timestamp":1700000000001}')
    assert newer.header["changed"] == "true"
