"""Broker ACL over the wire (issue 14): a real name server with a cluster secret and a real broker with
``aclEnable=true`` and a ``plain_acl.yml``; requests from our SDK and from a raw remoting client, signed, unsigned
and wrongly signed; the file changed while the broker runs; fake broker registrations."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, ClientError, Message, MessageQueue, Producer, PullConsumer, PullStatus
from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials, sign_registration
from tests.conftest import ROOT
from tests.integration.acl_cluster import ACL_EXCEPTION, CLUSTER_SECRET, AclCluster, call
from tests.integration.cluster import ENV, _start, stop_process, wait_until

pytestmark = pytest.mark.integration

ACL = """
globalWhiteRemoteAddresses: [10.9.9.*]
accounts:
  - accessKey: acl-producer
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclOrders=PUB]
  - accessKey: acl-consumer
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: [AclSecret=DENY]
    groupPerms: [acl-denied=DENY]
  - accessKey: acl-admin01
    secretKey: admin-secret
    admin: true
  - accessKey: acl-trusted
    secretKey: trusted-secret
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
"""
PRODUCER = SessionCredentials("acl-producer", "producer-secret")
CONSUMER = SessionCredentials("acl-consumer", "consumer-secret")
ADMIN = SessionCredentials("acl-admin01", "admin-secret")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(tmp_path_factory.mktemp("acl"), ACL)
    try:
        with AdminClient(c.namesrv, credentials=ADMIN) as admin:
            for topic in ("AclOrders", "AclOther", "AclSecret"):
                admin.create_topic(topic, 2, 2)
        yield c
    finally:
        c.close()


def send_header(topic: str, group: str = "acl-pg") -> dict[str, object]:
    return {"a": group, "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1700000000000, "h": 0, "i": "",
            "j": 0, "k": False, "m": False}


def assert_refused(resp: RemotingCommand, reason: str) -> None:
    assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, ACL_EXCEPTION + reason)


def test_unsigned_wrong_secret_and_unknown_key_are_refused(cluster: AclCluster) -> None:
    addr = cluster.broker.addr
    header = send_header("AclOrders")
    assert_refused(call(addr, RequestCode.SEND_MESSAGE_V2, header, b"x"), "No accessKey is configured")
    assert_refused(call(addr, RequestCode.SEND_MESSAGE_V2, header, b"x", SessionCredentials("acl-producer", "guess!!")),
                   "Check signature failed for accessKey=acl-producer")
    assert_refused(call(addr, RequestCode.SEND_MESSAGE_V2, header, b"x", SessionCredentials("nobody-x", "secret-x")),
                   "No acl config for nobody-x")
    ok = call(addr, RequestCode.SEND_MESSAGE_V2, header, b"x", PRODUCER)
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    ok_json = call(addr, RequestCode.SEND_MESSAGE_V2, header, b"x", PRODUCER, serialize_type=SERIALIZE_JSON)
    assert ok_json.code == ResponseCode.SUCCESS, ok_json.remark


def test_unsigned_oneway_request_is_refused_without_a_reply(cluster: AclCluster) -> None:
    oneway = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_header("AclOrders"), b"dropped", oneway=True)
    oneway.opaque = 41
    normal = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    normal.opaque = 42
    with socket.create_connection(("127.0.0.1", cluster.broker.port), timeout=10) as sock:
        sock.sendall(oneway.encode() + normal.encode())
        decoder, got = FrameDecoder(), []
        while not got:
            data = sock.recv(65536)
            assert data, "the broker closed the connection"
            got = decoder.feed(data)
    assert [(r.opaque, r.code) for r in got] == [(42, ResponseCode.NO_PERMISSION)]  # nothing for opaque 41


def test_account_white_list_skips_signature_and_permissions(cluster: AclCluster) -> None:
    # acl-trusted has defaultTopicPerm DENY and a wrong secret here, but 127.0.0.1 is its white-listed address
    resp = call(cluster.broker.addr, RequestCode.SEND_MESSAGE_V2, send_header("AclOther"), b"w",
                SessionCredentials("acl-trusted", "not-the-secret"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def test_topic_permissions_for_send_and_pull_through_the_sdk(cluster: AclCluster) -> None:
    with Producer("acl-pg", cluster.namesrv, credentials=PRODUCER) as producer:
        sent = producer.send(Message("AclOrders", b"signed-order"), queue=MessageQueue("AclOrders", "broker-acl", 0))
        with pytest.raises(ClientError) as refused:
            producer.send(Message("AclOther", b"nope"))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "No default permission for topic:AclOther" in str(refused.value)

    with Producer("acl-pg2", cluster.namesrv, credentials=CONSUMER) as sub_only:  # SUB only: cannot publish
        with pytest.raises(ClientError, match="No default permission for topic:AclOrders"):
            sub_only.send(Message("AclOrders", b"nope"))

    consumer = PullConsumer("acl-readers", cluster.namesrv, credentials=CONSUMER).start()
    try:
        res = consumer.pull(MessageQueue("AclOrders", "broker-acl", 0), 0)
        assert res.status == PullStatus.FOUND and sent.msg_id in {m.msg_id for m in res.messages}
        with pytest.raises(ClientError, match="No permission for topic:AclSecret"):
            consumer.pull(MessageQueue("AclSecret", "broker-acl", 0), 0)
    finally:
        consumer.shutdown()
    denied = PullConsumer("acl-denied", cluster.namesrv, credentials=CONSUMER).start()
    try:
        with pytest.raises(ClientError, match="No permission for group:acl-denied"):
            denied.pull(MessageQueue("AclOrders", "broker-acl", 0), 0)
    finally:
        denied.shutdown()


def heartbeat(group: str, topic: str) -> bytes:
    return json.dumps({"clientID": "127.0.0.1@acl", "producerDataSet": [], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
         "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
                                  "classFilterMode": False, "subVersion": 1, "expressionType": "TAG"}]}]}).encode()


def test_group_permissions_for_heartbeat_and_offset_commit(cluster: AclCluster) -> None:
    addr = cluster.broker.addr
    ok = call(addr, RequestCode.HEART_BEAT, {}, heartbeat("acl-ok", "AclOrders"), CONSUMER)
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    assert_refused(call(addr, RequestCode.HEART_BEAT, {}, heartbeat("acl-denied", "AclOrders"), CONSUMER),
                   "No permission for group:acl-denied")
    assert_refused(call(addr, RequestCode.HEART_BEAT, {}, heartbeat("acl-ok", "AclOrders"), PRODUCER),
                   "No default permission for group:acl-ok")  # defaultGroupPerm DENY
    commit = {"consumerGroup": "acl-ok", "topic": "AclOrders", "queueId": 0, "commitOffset": 1}
    resp = call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, commit, credentials=CONSUMER)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert_refused(call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**commit, "consumerGroup": "acl-denied"},
                        credentials=CONSUMER), "No permission for group:acl-denied")
    assert_refused(call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**commit, "topic": "AclSecret"},
                        credentials=CONSUMER), "No permission for topic:AclSecret")


def test_admin_codes_need_an_admin_account(cluster: AclCluster) -> None:
    with AdminClient(cluster.namesrv, credentials=PRODUCER) as not_admin:
        with pytest.raises(ClientError, match="Need admin permission for request code=17, but accessKey="
                                              "acl-producer is not"):
            not_admin.create_topic("AclNew", 1, 1)
        with pytest.raises(ClientError, match="Need admin permission for request code=215"):
            not_admin.delete_topic("AclOther")
    with AdminClient(cluster.namesrv) as reader:  # the name server still lists it: the deletion never happened
        assert "AclOther" in reader.topic_list()
    with AdminClient(cluster.namesrv, credentials=ADMIN) as admin:
        admin.create_topic("AclNew", 1, 1)
        admin.delete_topic("AclNew")
        config = admin.broker_config(cluster.broker.addr)
    assert config["aclEnable"] == "true" and "clusterSecret" not in config
    assert CLUSTER_SECRET not in json.dumps(config)


def test_fake_broker_registration_is_refused(cluster: AclCluster) -> None:
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {
            "AclOrders": {"topicName": "AclOrders", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}}}}).encode()
    header = {"brokerName": "broker-acl", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster",
              "haServerAddr": "", "brokerId": 0, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    fake = RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body)
    resp = call(cluster.namesrv, RequestCode.REGISTER_BROKER, fake.header, body)
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark.startswith("broker registration refused: this name server requires a broker registration "
                                  "signed with the cluster secret")
    wrong = sign_registration(RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body), "not-the-secret",
                              time.time_ns() // 1_000_000)
    resp = call(cluster.namesrv, RequestCode.REGISTER_BROKER, wrong.header, body)
    assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, "broker registration refused: the "
                                        "registration's signature does not match this name server's cluster secret")
    unregister = {"brokerName": "broker-acl", "brokerAddr": cluster.broker.addr, "clusterName": "DefaultCluster",
                  "brokerId": 0}
    assert call(cluster.namesrv, RequestCode.UNREGISTER_BROKER, unregister).code == ResponseCode.NO_PERMISSION
    with AdminClient(cluster.namesrv) as admin:
        addrs = admin.cluster_info()["brokerAddrTable"]["broker-acl"]["brokerAddrs"]
        assert addrs == {"0": cluster.broker.addr}  # the real broker, still registered
        assert all(q["writeQueueNums"] == 2 for q in admin.topic_route("AclOrders")["queueDatas"])


def test_acl_file_changes_take_effect_without_a_restart(cluster: AclCluster) -> None:
    addr = cluster.broker.addr
    try:
        cluster.write_acl(ACL.replace("topicPerms: [AclOrders=PUB]", "topicPerms: [AclOrders=PUB, AclOther=PUB]"))
        wait_until(lambda: call(addr, RequestCode.SEND_MESSAGE_V2, send_header("AclOther"), b"y",
                                PRODUCER).code == ResponseCode.SUCCESS, what="the grant of PUB on AclOther")
        cluster.write_acl(ACL.replace("[10.9.9.*]", "[10.9.9.*, 127.0.0.*]"))  # the global white list
        wait_until(lambda: call(addr, RequestCode.SEND_MESSAGE_V2, send_header("AclSecret"), b"z").code
                   == ResponseCode.SUCCESS, what="unsigned requests from 127.0.0.1 to be allowed")
        cluster.write_acl("accounts: [unclosed")  # broken: the last good rules stay

        def reload_failed() -> bool:  # the file is looked at as requests arrive, at most once a second
            assert call(addr, RequestCode.SEND_MESSAGE_V2, send_header("AclSecret"), b"z").code == ResponseCode.SUCCESS
            return "ACL file reload failed, keeping the rules loaded before" in cluster.broker.log_path.read_text()
        wait_until(reload_failed, what="the failed reload to be logged")
    finally:
        cluster.write_acl(ACL)
        wait_until(lambda: call(addr, RequestCode.SEND_MESSAGE_V2, send_header("AclOrders"), b"x").code
                   == ResponseCode.NO_PERMISSION, what="the original rules to come back")


def test_name_server_without_secret_accepts_unsigned_registration(tmp_path: Path) -> None:
    proc, port = _start(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0"], tmp_path / "namesrv.log")
    try:
        header = {"brokerName": "java-style", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster",
                  "haServerAddr": "", "brokerId": "0", "bodyCrc32": "0"}
        resp = call(f"127.0.0.1:{port}", RequestCode.REGISTER_BROKER, header, b"", serialize_type=SERIALIZE_JSON)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        stop_process(proc)


@pytest.mark.parametrize(("conf", "acl_file", "code", "message"), [
    ("aclEnable=true\n", None, 2, "aclEnable=true needs clusterSecret"),
    (f"aclEnable=true\nclusterSecret={CLUSTER_SECRET}\n", None, 1, "cannot read the ACL file"),
    (f"aclEnable=true\nclusterSecret={CLUSTER_SECRET}\n", "accounts: [{accessKey: short}]", 1, "longer than 6"),
])
def test_broker_will_not_start_with_acl_on_and_no_usable_setup(tmp_path: Path, conf: str, acl_file: str | None,
                                                               code: int, message: str) -> None:
    store = tmp_path / "store"
    if acl_file is not None:
        (store / "config").mkdir(parents=True)
        (store / "config" / "plain_acl.yml").write_text(acl_file)
    (tmp_path / "broker.conf").write_text(conf)
    proc = subprocess.run([sys.executable, "-m", "broker_core", "--store-dir", str(store), "--listen",
                           "127.0.0.1:0", "--config", str(tmp_path / "broker.conf")], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code and message in proc.stderr, proc.stderr[-2000:]
    assert "READY" not in proc.stdout
