"""The broker's data path as RocketMQ 4.x clients drive it: requests built the way the Java, Go and C++ clients
build them (reference §1-§4: JSON headers with string values, V2 single-letter send headers, RocketMQ's batch
body, PullSysFlag bits) against a real broker process, checked field by field against the reference."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator

import pytest

from broker_core.codec.message import decode_record
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.codec.wire import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

SUSPEND, COMMIT, SUBSCRIPTION = 0x2, 0x1, 0x4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("remoting"))
    try:
        c.add_brokers_registered({"broker-a": "autoCreateTopicEnable=true\n"})
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def broker(cluster: Cluster) -> str:
    return cluster.brokers["broker-a"].addr


@pytest.fixture
def client() -> Iterator[BlockingClient]:
    c = BlockingClient(serialize_type=SERIALIZE_JSON)
    yield c
    c.close()


def call(client: BlockingClient, addr: str, code: int, header: dict[str, object], body: bytes = b"",
         timeout: float = 5.0) -> RemotingCommand:
    return client.invoke(addr, RemotingCommand.request(code, {k: str(v) if not isinstance(v, str) else v
                                                              for k, v in header.items()}, body), timeout)


def v2_send(topic: str, queue_id: int = 0, props: str = "", **extra: object) -> dict[str, object]:
    """A SEND_MESSAGE_V2 header as the Java client fills it (every value a string)."""
    return {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "l": "16", "m": "false",
            **extra}


def java_batch(entries: list[tuple[int, bytes, str]]) -> bytes:
    """``MessageDecoder.encodeMessages``: TOTALSIZE, MAGIC 0, CRC 0, FLAG, BODY, PROPERTIES (reference §3.3)."""
    out = b""
    for flag, body, props in entries:
        p = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(p), 0, 0, flag, len(body)) + body
        out += struct.pack(">h", len(p)) + p
    return out


def records(body: bytes) -> list:  # type: ignore[type-arg]
    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.store_size
    return out


def pull(client: BlockingClient, addr: str, topic: str, offset: int, sys_flag: int, *, group: str = "cg",
         commit: int = 0, suspend_ms: int = 0, sub: str = "*", timeout: float = 5.0) -> RemotingCommand:
    return call(client, addr, RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": sys_flag, "commitOffset": commit, "suspendTimeoutMillis": suspend_ms, "subscription": sub,
        "subVersion": 0, "expressionType": "TAG"}, timeout=timeout)


def test_send_v2_answers_rocketmq_send_response(client: BlockingClient, broker: str):
    resp = call(client, broker, RequestCode.SEND_MESSAGE_V2,
                v2_send("CompatSend", props="UNIQ_KEY\x01ABC\x02WAIT\x01true\x02TAGS\x01TagA"), b"hello")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    h = resp.header
    assert set(h) >= {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert all(isinstance(v, str) for v in h.values())  # Go decodes map[string]string
    assert h["MSG_REGION"] == "DefaultRegion" and h["TRACE_ON"] == "true"
    assert len(h["msgId"]) == 32 and h["msgId"] == h["msgId"].upper()  # the offset message id, not UNIQ_KEY
    ip, port, phy = decode_offset_msg_id(h["msgId"])
    assert f"{ip}:{port}" == broker
    view = call(client, broker, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})
    (rec,) = records(view.body)
    assert rec.body == b"hello" and rec.queue_offset == int(h["queueOffset"]) and rec.queue_id == int(h["queueId"])
    assert rec.properties["UNIQ_KEY"] == "ABC" and rec.properties["CLUSTER"] == "DefaultCluster"
    assert "WAIT" not in rec.properties  # stripped before storing, as RocketMQ 4.9.1+


def test_v1_send_with_random_queue_and_binary_header(broker: str):
    c = BlockingClient(serialize_type=SERIALIZE_ROCKETMQ)
    try:
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, {
            "producerGroup": "pg", "topic": "CompatSend", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "-1", "sysFlag": "0", "bornTimestamp": "1", "flag": "7", "properties": "", "batch": "false"},
            b"v1")
        resp = c.invoke(broker, cmd)
        assert resp.code == ResponseCode.SUCCESS and resp.serialize_type == SERIALIZE_ROCKETMQ
        assert 0 <= int(resp.header["queueId"]) < 4  # queueId < 0: the broker picks one
    finally:
        c.close()


def test_batch_send_splits_rocketmq_batch_body(client: BlockingClient, broker: str):
    body = java_batch([(1, b"one", "UNIQ_KEY\x01U1\x02KEYS\x01k1\x02"), (2, b"two", "UNIQ_KEY\x01U2")])
    resp = call(client, broker, RequestCode.SEND_BATCH_MESSAGE,
                v2_send("CompatBatch", props="WAIT\x01true\x02hdr\x01x", m="true"), body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ids = resp.header["msgId"].split(",")
    assert len(ids) == 2
    got = [records(call(client, broker, RequestCode.VIEW_MESSAGE_BY_ID,
                         {"offset": decode_offset_msg_id(i)[2]}).body)[0] for i in ids]
    assert [r.body for r in got] == [b"one", b"two"] and [r.flag for r in got] == [1, 2]
    assert [r.queue_offset for r in got] == [int(resp.header["queueOffset"]), int(resp.header["queueOffset"]) + 1]
    for r, uniq in zip(got, ("U1", "U2"), strict=True):  # each entry's own properties plus the header's
        assert r.properties["UNIQ_KEY"] == uniq and r.properties["hdr"] == "x"
        assert r.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in r.properties
    # only the batch flag selects the batch path: a 320 without it is one message of the raw bytes
    resp = call(client, broker, RequestCode.SEND_BATCH_MESSAGE, v2_send("CompatBatch"), body)
    assert resp.code == ResponseCode.SUCCESS and "," not in resp.header["msgId"]
    (raw,) = records(call(client, broker, RequestCode.VIEW_MESSAGE_BY_ID,
                          {"offset": decode_offset_msg_id(resp.header["msgId"])[2]}).body)
    assert raw.body == body
    # and a 10 with batch=true takes it (the Go client's single-send code)
    resp = call(client, broker, RequestCode.SEND_MESSAGE, {
        "producerGroup": "pg", "topic": "CompatBatch", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 0, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "batch": "true"}, body)
    assert resp.code == ResponseCode.SUCCESS and len(resp.header["msgId"].split(",")) == 2
    resp = call(client, broker, RequestCode.SEND_BATCH_MESSAGE, v2_send("CompatBatch", props="DELAY\x013", m="true"),
                body)
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "delay" in resp.remark


def test_pull_honours_sys_flag(client: BlockingClient, broker: str):
    topic = "CompatPull"
    call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send(topic), b"x")
    resp = pull(client, broker, topic, 0, SUBSCRIPTION)
    assert resp.code == ResponseCode.SUCCESS and len(records(resp.body)) == 1
    for field in ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"):
        assert field in resp.header  # Java unboxes all four
    # no SUSPEND bit: an empty queue answers at once (the C++ core's pull must not be held past its timeout)
    started = time.monotonic()
    resp = pull(client, broker, topic, 1, SUBSCRIPTION, suspend_ms=15000)
    assert resp.code == ResponseCode.PULL_NOT_FOUND and time.monotonic() - started < 2.0
    assert resp.header["nextBeginOffset"] == "1" and resp.header["suggestWhichBrokerId"] == "0"
    # SUSPEND: held until a message arrives
    c2 = BlockingClient()
    try:
        started = time.monotonic()
        import threading

        box: dict[str, RemotingCommand] = {}
        t = threading.Thread(target=lambda: box.setdefault("r", pull(c2, broker, topic, 1, SUBSCRIPTION | SUSPEND,
                                                                     suspend_ms=10000, timeout=15)))
        t.start()
        time.sleep(0.5)
        call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send(topic), b"y")
        t.join(12)
        assert box["r"].code == ResponseCode.SUCCESS and time.monotonic() - started < 8
    finally:
        c2.close()


def test_commit_offset_only_with_the_commit_bit(client: BlockingClient, broker: str):
    topic = "CompatCommit"
    for _ in range(6):
        call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send(topic), b"c")
    pull(client, broker, topic, 5, SUBSCRIPTION | COMMIT, group="commit-g", commit=5)

    def committed() -> str:
        return call(client, broker, RequestCode.QUERY_CONSUMER_OFFSET,
                    {"consumerGroup": "commit-g", "topic": topic, "queueId": 0}).header["offset"]

    assert committed() == "5"
    pull(client, broker, topic, 0, SUBSCRIPTION, group="commit-g", commit=0)  # commitOffset 0, no COMMIT bit
    assert committed() == "5"


def test_pull_without_subscription_bit_uses_the_heartbeat(client: BlockingClient, broker: str):
    topic = "CompatSub"
    for tag in ("TagA", "TagB", "TagA"):
        call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send(topic, props=f"TAGS\x01{tag}"), tag.encode())
    resp = pull(client, broker, topic, 0, 0, group="hb-group")
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    heartbeat = {"clientID": "10.0.0.5@1", "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
                 "consumerDataSet": [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                      "consumeType": "CONSUME_PASSIVELY", "groupName": "hb-group",
                                      "messageModel": "CLUSTERING", "unitMode": False, "subscriptionDataSet": [
                                          {"classFilterMode": False, "codeSet": [2598919], "expressionType": "TAG",
                                           "subString": "TagA", "subVersion": 1700000000000, "tagsSet": ["TagA"],
                                           "topic": topic}]}]}
    resp = call(client, broker, RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode())
    assert resp.code == ResponseCode.SUCCESS
    resp = pull(client, broker, topic, 0, 0, group="hb-group")
    assert resp.code == ResponseCode.SUCCESS and [r.body for r in records(resp.body)] == [b"TagA", b"TagA"]
    ids = json.loads(call(client, broker, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                          {"consumerGroup": "hb-group"}).body)
    assert ids == {"consumerIdList": ["10.0.0.5@1"]}
    # the heartbeat created the group's retry topic, as RocketMQ's does
    resp = call(client, broker, RequestCode.GET_MAX_OFFSET, {"topic": "%RETRY%hb-group", "queueId": 0})
    assert resp.code == ResponseCode.SUCCESS
    resp = call(client, broker, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"})
    assert resp.code == ResponseCode.SYSTEM_ERROR


def test_query_offset_rule_and_offsets(client: BlockingClient, broker: str):
    topic = "CompatOffsets"
    call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send(topic), b"o")
    resp = call(client, broker, RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "never-committed", "topic": topic, "queueId": 0})
    assert resp.code == ResponseCode.SUCCESS and resp.header["offset"] == "0"  # young queue, first message in memory
    wait_until(lambda: call(client, broker, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": 0}
                            ).header["offset"] == "1", what="the message to be dispatched")
    assert call(client, broker, RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": 0}).header["offset"] == "0"
    ts = call(client, broker, RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": topic, "queueId": 0})
    assert int(ts.header["timestamp"]) > 0
    resp = call(client, broker, RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "g1", "topic": topic, "queueId": 0, "commitOffset": 1})
    assert resp.code == ResponseCode.SUCCESS


def test_query_by_key_and_unique_key(client: BlockingClient, broker: str):
    topic = "CompatQuery"
    resp = call(client, broker, RequestCode.SEND_MESSAGE_V2,
                v2_send(topic, props="UNIQ_KEY\x01C0A8010100002A9F0000000000000001\x02KEYS\x01order-7 vip"), b"q")
    assert resp.code == ResponseCode.SUCCESS
    for key, extra in (("order-7", {}), ("vip", {}),
                       ("C0A8010100002A9F0000000000000001", {"_UNIQUE_KEY_QUERY": "true"})):
        found = call(client, broker, RequestCode.QUERY_MESSAGE, {"topic": topic, "key": key, "maxNum": 32,
                                                                 "beginTimestamp": 0, "endTimestamp": 1 << 62,
                                                                 **extra})
        assert found.code == ResponseCode.SUCCESS, key
        assert "indexLastUpdateTimestamp" in found.header and "indexLastUpdatePhyoffset" in found.header
        assert [r.body for r in records(found.body)] == [b"q"]
    missing = call(client, broker, RequestCode.QUERY_MESSAGE, {"topic": topic, "key": "nope", "maxNum": 32,
                                                               "beginTimestamp": 0, "endTimestamp": 1 << 62})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND


def test_transaction_commit_with_java_headers(client: BlockingClient, broker: str):
    topic = "CompatTx"
    props = "TRAN_MSG\x01true\x02PGROUP\x01tx-group\x02UNIQ_KEY\x01TX1"
    half = call(client, broker, RequestCode.SEND_MESSAGE_V2, {**v2_send(topic, props=props), "a": "tx-group",
                                                                "f": "4"}, b"tx")
    assert half.code == ResponseCode.SUCCESS
    resp = pull(client, broker, topic, 0, SUBSCRIPTION)
    assert resp.code != ResponseCode.SUCCESS  # a half message is invisible
    _, _, commit_log_offset = decode_offset_msg_id(half.header["msgId"])
    end = {"producerGroup": "tx-group", "tranStateTableOffset": half.header["queueOffset"],
           "commitLogOffset": commit_log_offset, "commitOrRollback": 8, "fromTransactionCheck": "false",
           "msgId": "TX1", "transactionId": "TX1"}
    assert call(client, broker, RequestCode.END_TRANSACTION, {**end, "producerGroup": "other"}).code == \
        ResponseCode.SYSTEM_ERROR
    assert call(client, broker, RequestCode.END_TRANSACTION, end).code == ResponseCode.SUCCESS
    resp = pull(client, broker, topic, 0, SUBSCRIPTION)
    assert resp.code == ResponseCode.SUCCESS and [r.body for r in records(resp.body)] == [b"tx"]


def test_send_back_retries_then_dead_letters(client: BlockingClient, broker: str):
    topic = "CompatBack"
    sent = call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send(topic, props="UNIQ_KEY\x01B1"), b"b")
    _, _, phy = decode_offset_msg_id(sent.header["msgId"])
    resp = call(client, broker, RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": phy, "group": "back-g", "delayLevel": 0, "originMsgId": "B1", "originTopic": topic,
        "unitMode": "false", "maxReconsumeTimes": 16})
    assert resp.code == ResponseCode.SUCCESS
    resp = call(client, broker, RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": phy, "group": "back-g", "delayLevel": -1, "originMsgId": "B1", "originTopic": topic})
    assert resp.code == ResponseCode.SUCCESS
    dlq = pull(client, broker, "%DLQ%back-g", 0, SUBSCRIPTION)
    assert dlq.code == ResponseCode.SUCCESS and records(dlq.body)[0].properties["UNIQ_KEY"] == "B1"


def test_acl_fields_and_bname_are_accepted_while_acl_is_off(client: BlockingClient, broker: str):
    """Clients with credentials configured always send AccessKey/Signature (and 4.9.5+ sends bname): with ACL off
    they change nothing (reference §1, §2.1)."""
    extra = {"AccessKey": "rocketmq2", "Signature": "c3lhZ2lnbmF0dXJl", "bname": "broker-a"}
    resp = call(client, broker, RequestCode.SEND_MESSAGE_V2, v2_send("CompatAcl", **extra), b"with credentials")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    wait_until(lambda: pull(client, broker, "CompatAcl", 0, SUBSCRIPTION).code == ResponseCode.SUCCESS,
               what="the message to be pullable")
    got = pull(client, broker, "CompatAcl", 0, SUBSCRIPTION)
    assert [r.body for r in records(got.body)] == [b"with credentials"]
    offset = call(client, broker, RequestCode.GET_MAX_OFFSET, {"topic": "CompatAcl", "queueId": 0, **extra})
    assert offset.code == ResponseCode.SUCCESS and offset.header["offset"] == "1"
