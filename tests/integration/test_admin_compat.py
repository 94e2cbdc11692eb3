"""Admin codes as ``mqadmin`` and the RocketMQ dashboard send them (JSON headers with string values) against a
real broker, with bodies checked against the shapes of reference §2.3, §5 and §7.5: fastjson's bare integer
keys and MessageQueue object keys where Java writes them."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from broker_core.codec.fastjson import FastjsonPairs, items, loads_fastjson
from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    c = Cluster(tmp_path_factory.mktemp("admin-compat"))
    try:
        c.add_brokers_registered({"broker-a": ""})
        yield c.brokers["broker-a"].addr
    finally:
        c.close()


@pytest.fixture
def client() -> Iterator[BlockingClient]:
    c = BlockingClient(serialize_type=SERIALIZE_JSON)
    yield c
    c.close()


def call(client: BlockingClient, addr: str, code: int, header: dict[str, object] | None = None,
         body: bytes = b"") -> RemotingCommand:
    return client.invoke(addr, RemotingCommand.request(code, {k: str(v) for k, v in (header or {}).items()}, body),
                         10.0)


def create(client: BlockingClient, broker: str, topic: str, queues: int = 2) -> None:
    resp = call(client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "MULTI_TAG", "topicSysFlag": 0, "order": "false"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def send(client: BlockingClient, broker: str, topic: str, queue_id: int, body: bytes) -> None:
    resp = call(client, broker, RequestCode.SEND_MESSAGE_V2, {
        "a": "admin-pg", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": int(time.time() * 1000),
        "h": 0, "i": "", "j": 0, "k": "false", "l": 16, "m": "false"}, body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def mq_table(body: bytes) -> dict[tuple[str, str, int], dict[str, int]]:
    table = loads_fastjson(body)["offsetTable"]
    assert isinstance(table, FastjsonPairs)  # MessageQueue objects in key position, as fastjson writes them
    return {(dict(k)["topic"], dict(k)["brokerName"], dict(k)["queueId"]): v for k, v in table}


def test_topic_config_and_stats(client: BlockingClient, broker: str) -> None:
    create(client, broker, "AdmT", 2)
    for i in range(3):
        send(client, broker, "AdmT", 1, f"m{i}".encode())
    wrapper = json.loads(call(client, broker, RequestCode.GET_ALL_TOPIC_CONFIG).body)
    assert set(wrapper) == {"dataVersion", "topicConfigTable"} and set(wrapper["dataVersion"]) == {
        "counter", "timestamp"}
    assert wrapper["topicConfigTable"]["AdmT"] == {
        "order": False, "perm": 6, "readQueueNums": 2, "topicFilterType": "MULTI_TAG", "topicName": "AdmT",
        "topicSysFlag": 0, "writeQueueNums": 2}
    def stats_now() -> dict[tuple[str, str, int], dict[str, int]]:
        return mq_table(call(client, broker, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "AdmT"}).body)
    wait_until(lambda: stats_now()[("AdmT", "broker-a", 1)]["maxOffset"] == 3, what="dispatch")  # the CQ is async
    stats = stats_now()
    assert stats[("AdmT", "broker-a", 0)] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}
    q1 = stats[("AdmT", "broker-a", 1)]
    assert q1["maxOffset"] == 3 and q1["minOffset"] == 0 and q1["lastUpdateTimestamp"] > 0
    missing = call(client, broker, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchAdmT"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    # deleting a topic the broker does not hold succeeds (mqadmin sends it to every master)
    assert call(client, broker, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "NoSuchAdmT"}).code == 0
    system = json.loads(call(client, broker, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER).body)["topicList"]
    assert {"DefaultCluster", "broker-a"} <= set(system) and "AdmT" not in system


def test_broker_config_and_runtime(client: BlockingClient, broker: str) -> None:
    resp = call(client, broker, RequestCode.GET_BROKER_CONFIG)
    props = dict(line.split("=", 1) for line in resp.body.decode().splitlines())
    assert props["brokerName"] == "broker-a" and props["maxReconsumeTimes"] == "16"
    assert set(json.loads(resp.header["version"])) == {"counter", "timestamp"}
    ok = call(client, broker, RequestCode.UPDATE_BROKER_CONFIG, body=b"maxReconsumeTimes=5\nnoSuchKey=1\n")
    assert ok.code == ResponseCode.SUCCESS
    props = dict(line.split("=", 1) for line in call(client, broker, RequestCode.GET_BROKER_CONFIG).body
                 .decode().splitlines())
    assert props["maxReconsumeTimes"] == "5"
    bad = call(client, broker, RequestCode.UPDATE_BROKER_CONFIG, body=b"maxReconsumeTimes=many\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "maxReconsumeTimes" in bad.remark
    fixed = call(client, broker, RequestCode.UPDATE_BROKER_CONFIG, body=b"storePathRootDir=/tmp/x\n")
    assert fixed.code == ResponseCode.SYSTEM_ERROR and "storePathRootDir" in fixed.remark
    call(client, broker, RequestCode.UPDATE_BROKER_CONFIG, body=b"maxReconsumeTimes=16\n")
    table = json.loads(call(client, broker, RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert all(isinstance(v, str) for v in table.values())
    assert table["brokerVersionDesc"] == "V4_9_4" and int(table["commitLogMaxOffset"]) >= 0
    assert float(table["putTps"].split(" ")[0]) >= 0  # the dashboard reads the first number


def test_offsets_groups_and_stats(client: BlockingClient, broker: str) -> None:
    create(client, broker, "AdmO", 2)
    for i in range(4):
        send(client, broker, "AdmO", 0, f"o{i}".encode())
    group = json.dumps({"groupName": "adm-cg", "consumeEnable": True, "consumeBroadcastEnable": False,
                        "retryQueueNums": 1, "retryMaxTimes": 3, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                        "notifyConsumerIdsChangedEnable": True, "consumeFromMinEnable": True}).encode()
    assert call(client, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group).code == 0
    bad = call(client, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"{")
    assert bad.code == ResponseCode.SYSTEM_ERROR
    groups = json.loads(call(client, broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert groups["subscriptionGroupTable"]["adm-cg"]["retryMaxTimes"] == 3
    assert groups["subscriptionGroupTable"]["adm-cg"]["consumeBroadcastEnable"] is False
    call(client, broker, RequestCode.UPDATE_CONSUMER_OFFSET,
         {"consumerGroup": "adm-cg", "topic": "AdmO", "queueId": 0, "commitOffset": 3})
    raw = call(client, broker, RequestCode.GET_ALL_CONSUMER_OFFSET).body.decode()
    assert '"AdmO@adm-cg":{0:3}' in raw  # Map<Integer,Long> with bare keys
    assert loads_fastjson(call(client, broker, RequestCode.GET_ALL_DELAY_OFFSET).body)["offsetTable"] is not None
    wait_until(lambda: mq_table(call(client, broker, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "AdmO"}).body)[
        ("AdmO", "broker-a", 0)]["maxOffset"] == 4, what="dispatch")
    stats = loads_fastjson(call(client, broker, RequestCode.GET_CONSUME_STATS,
                                {"consumerGroup": "adm-cg", "topic": "AdmO"}).body)
    assert isinstance(stats["consumeTps"], float | int)
    table = mq_table(call(client, broker, RequestCode.GET_CONSUME_STATS,
                          {"consumerGroup": "adm-cg", "topic": "AdmO"}).body)
    q0, q1 = table[("AdmO", "broker-a", 0)], table[("AdmO", "broker-a", 1)]
    assert (q0["brokerOffset"], q0["consumerOffset"]) == (4, 3) and q0["lastTimestamp"] > 0
    assert (q1["brokerOffset"], q1["consumerOffset"], q1["lastTimestamp"]) == (0, 0, 0)  # never committed: 0
    who = json.loads(call(client, broker, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "AdmO"}).body)
    assert who == {"groupList": ["adm-cg"]}
    assert call(client, broker, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "adm-cg"}).code == 0
    groups = json.loads(call(client, broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert "adm-cg" not in groups["subscriptionGroupTable"]
    assert dict(items(loads_fastjson(raw)["offsetTable"]["AdmO@adm-cg"])) == {0: 3}


def test_connections(client: BlockingClient, broker: str) -> None:
    none = call(client, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "adm-nobody"})
    assert none.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert call(client, broker, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                {"producerGroup": "adm-nobody"}).code == ResponseCode.SYSTEM_ERROR
    heartbeat = {"clientID": "10.0.0.5@4242", "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": "adm-live",
        "messageModel": "CLUSTERING", "unitMode": False, "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [2598919], "expressionType": "TAG", "subString": "TagA",
            "subVersion": 1700000000000, "tagsSet": ["TagA"], "topic": "AdmO"}]}],
        "producerDataSet": [{"groupName": "adm-producer"}]}
    hb = client.invoke(broker, RemotingCommand.request(RequestCode.HEART_BEAT, {},
                                                       json.dumps(heartbeat).encode()), 10.0)
    assert hb.code == ResponseCode.SUCCESS
    cc = json.loads(call(client, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                         {"consumerGroup": "adm-live"}).body)
    assert (cc["consumeType"], cc["messageModel"], cc["consumeFromWhere"]) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    (conn,) = cc["connectionSet"]
    assert conn["clientId"] == "10.0.0.5@4242" and conn["language"] == "PYTHON" and conn["version"] > 0
    assert ":" in conn["clientAddr"]
    assert cc["subscriptionTable"]["AdmO"] == heartbeat["consumerDataSet"][0]["subscriptionDataSet"][0]  # type: ignore[index]
    pc = json.loads(call(client, broker, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                         {"producerGroup": "adm-producer"}).body)
    assert [c["clientId"] for c in pc["connectionSet"]] == ["10.0.0.5@4242"]


def _member(broker: str, group: str, topic: str) -> socket.socket:
    """A raw consumer connection that registered ``group`` with a Java-style heartbeat (version 4.9.4)."""
    host, port = broker.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    hb = {"clientID": f"10.0.0.9@{group}", "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": group,
        "messageModel": "CLUSTERING", "unitMode": False, "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
            "tagsSet": [], "topic": topic}]}], "producerDataSet": []}
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(hb).encode())
    cmd.serialize_type = SERIALIZE_JSON
    sock.sendall(cmd.encode())
    return sock


def _next_request(sock: socket.socket, code: int) -> RemotingCommand:
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        assert data, "the broker closed the connection"
        for got in decoder.feed(data):
            if got.code == code and not got.is_response:
                return got


@pytest.mark.parametrize("language", ["JAVA", "CPP"])
def test_reset_offset_tells_members_in_their_form(client: BlockingClient, broker: str, language: str) -> None:
    """222 answers ResetOffsetBody and sends 220 to the group's members: the MessageQueue-keyed map, or, when
    the admin request came from a CPP client, ResetOffsetBodyForC's list (as Java's Broker2Client)."""
    group, topic = f"adm-reset-{language.lower()}", f"AdmR{language}"
    create(client, broker, topic, 2)
    for i in range(3):
        send(client, broker, topic, 1, f"r{i}".encode())
    sock = _member(broker, group, topic)
    try:
        wait_until(lambda: call(client, broker, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                {"consumerGroup": group}).code == ResponseCode.SUCCESS, what="the member")
        wait_until(lambda: mq_table(call(client, broker, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}).body)[
            (topic, "broker-a", 1)]["maxOffset"] == 3, what="dispatch")
        cmd = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": topic, "group": group, "timestamp": "0", "isForce": "true"})
        cmd.language = language
        resp = client.invoke(broker, cmd, 10.0)
        assert resp.code == ResponseCode.SUCCESS
        assert {k[2]: v for k, v in mq_table(resp.body).items()} == {0: 0, 1: 0}  # the map form answers the admin
        pushed = _next_request(sock, RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
        assert pushed.header["group"] == group and pushed.header["isForce"] == "true"
        if language == "CPP":
            assert json.loads(pushed.body) == {"offsetTable": [
                {"brokerName": "broker-a", "offset": 0, "queueId": 0, "topic": topic},
                {"brokerName": "broker-a", "offset": 0, "queueId": 1, "topic": topic}]}
        else:
            assert {k[2]: v for k, v in mq_table(pushed.body).items()} == {0: 0, 1: 0}
    finally:
        sock.close()
