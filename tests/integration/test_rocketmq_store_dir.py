"""A broker started on a store directory written in Apache RocketMQ 4.9's format (by the independent writer in
``rocketmq_store.py``, RocketMQ's default file sizes) serves it in place: topics from ``topics.json``,
committed offsets, pulls from offset 0 returning the very bytes RocketMQ wrote, key and id lookups through
the IndexFile; new writes continue after the old ones; the files stay in RocketMQ's form. Run after a clean
shutdown and after an unclean one (``abort`` present: recovery walks and CRC-checks every record)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core.codec.fastjson import items, loads_fastjson
from broker_core.codec.message import decode_record
from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster, _start, free_port, wait_until
from tests.integration.rocketmq_store import Msg, offset_msg_id, write_store

pytestmark = pytest.mark.integration

OFFSETS = {"Orders@cg": {0: 3, 1: 2, 2: 0, 3: 5}, "Audit@cg": {0: 1}}


def messages() -> list[Msg]:
    out = []
    for i in range(40):
        out.append(Msg("Orders", i % 4, f"order {i} körper".encode(), tags=("TagA", "TagB", "")[i % 3],
                       keys=f"order-{i} cust-{i % 5}", uniq=f"0A000005{i:024X}", user={"region": "eu", "n": str(i)},
                       born_ms=1_700_000_000_000 + i * 1500, store_ms=1_700_000_000_007 + i * 1500))
    for i in range(5):
        out.append(Msg("Audit", 0, b"\x00\xffbinary" * i, keys=f"audit-{i}", uniq=f"0A000005{1000 + i:024X}",
                       store_ms=1_700_000_100_000 + i))
    return out


@dataclass
class Served:
    addr: str
    namesrv: str
    store: Path
    msgs: list[Msg]
    raw: bytes  # the CommitLog bytes RocketMQ "wrote"
    port: int
    tmp: Path
    proc: object = None

    def start(self) -> None:
        conf = self.tmp / "broker.conf"
        conf.write_text("brokerName=broker-a\nwarmMapedFileEnable=false\nregisterNameServerPeriod=1000\n"
                        "fastListenEnable=false\n"
                        # any free HA port: listenPort + 1 may be held by another process's ephemeral socket
                        "haListenPort=0\n")
        self.proc, _ = _start(["-m", "broker_core", "--store-dir", str(self.store), "--listen", self.addr,
                               "--namesrv", self.namesrv, "--config", str(conf)], self.tmp / "broker.log")

    def stop(self) -> None:
        if self.proc is None:  # start() failed: its error is the one to report
            return
        self.proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
        self.proc.wait(timeout=60)  # type: ignore[attr-defined]


@pytest.fixture(scope="module", params=["clean", "abort"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"rmqstore-{request.param}")
    port = free_port()
    store = tmp / "store"
    msgs = write_store(store, messages(), store_ip="127.0.0.1", store_port=port,
                       queues={"Orders": 4, "Audit": 1}, offsets=OFFSETS)
    if request.param == "abort":
        (store / "abort").write_bytes(b"")
    with open(store / "commitlog" / f"{0:020d}", "rb") as fh:
        raw = fh.read(msgs[-1].phy + msgs[-1].size)
    cluster = Cluster(tmp)
    s = Served(f"127.0.0.1:{port}", cluster.namesrv, store, msgs, raw, port, tmp)
    try:
        s.start()
        yield s
    finally:
        try:
            s.stop()
        finally:
            cluster.close()


@pytest.fixture
def client() -> Iterator[BlockingClient]:
    c = BlockingClient(serialize_type=SERIALIZE_JSON)
    yield c
    c.close()


def call(client: BlockingClient, addr: str, code: int, header: dict[str, object], body: bytes = b"") -> RemotingCommand:
    return client.invoke(addr, RemotingCommand.request(code, {k: str(v) for k, v in header.items()}, body), 10.0)


def pull(client: BlockingClient, addr: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    return call(client, addr, RequestCode.PULL_MESSAGE, {
        "consumerGroup": "reader", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 64,
        "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0,
        "expressionType": "TAG"})


def original(s: Served, m: Msg) -> bytes:
    return s.raw[m.phy:m.phy + m.size]


def test_topics_are_routed_from_topics_json(served: Served, client: BlockingClient) -> None:
    def route() -> RemotingCommand:
        return call(client, served.namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})
    wait_until(lambda: route().code == ResponseCode.SUCCESS, timeout=30, what="Orders route")
    queue_data = loads_fastjson(route().body)["queueDatas"]
    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in queue_data] == [
        ("broker-a", 4, 4, 6)]


def test_committed_offsets_are_served(served: Served, client: BlockingClient) -> None:
    for key, queues in OFFSETS.items():
        topic, group = key.split("@")
        for qid, off in queues.items():
            resp = call(client, served.addr, RequestCode.QUERY_CONSUMER_OFFSET,
                        {"consumerGroup": group, "topic": topic, "queueId": qid})
            assert resp.code == ResponseCode.SUCCESS and int(resp.header["offset"]) == off


def test_pull_from_zero_returns_rocketmq_bytes(served: Served, client: BlockingClient) -> None:
    for topic, queues in (("Orders", 4), ("Audit", 1)):
        for qid in range(queues):
            mine = [m for m in served.msgs if m.topic == topic and m.queue_id == qid]
            resp = pull(client, served.addr, topic, qid, 0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert resp.body == b"".join(original(served, m) for m in mine)  # byte for byte
            assert int(resp.header["nextBeginOffset"]) >= len(mine)
            assert int(resp.header["minOffset"]) == 0
            end = pull(client, served.addr, topic, qid, len(mine) + 100 if topic == "Audit" else len(mine))
            assert end.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)


def test_lookups_by_key_and_id_use_rocketmq_index(served: Served, client: BlockingClient) -> None:
    m = served.msgs[17]
    for key, unique in (("order-17", False), (m.uniq, True)):
        header: dict[str, object] = {"topic": "Orders", "key": key, "maxNum": 32, "beginTimestamp": 0,
                                     "endTimestamp": 2 ** 62}
        if unique:
            header["_UNIQUE_KEY_QUERY"] = "true"
        resp = call(client, served.addr, RequestCode.QUERY_MESSAGE, header)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.body == original(served, m)
    resp = call(client, served.addr, RequestCode.QUERY_MESSAGE, {
        "topic": "Orders", "key": "cust-2", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2 ** 62})
    assert len(resp.body) == sum(x.size for x in served.msgs if x.topic == "Orders" and x.keys.endswith("cust-2"))
    for m in (served.msgs[0], served.msgs[-1]):
        resp = call(client, served.addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": m.phy})
        assert resp.code == ResponseCode.SUCCESS and resp.body == original(served, m)
    from broker_core.client import AdminClient
    with AdminClient(served.namesrv) as admin:
        ext = admin.view_message(offset_msg_id("127.0.0.1", served.port, served.msgs[5].phy))
        assert ext.body == served.msgs[5].body and ext.queue_offset == served.msgs[5].queue_offset
        assert ext.properties["region"] == "eu" and ext.properties["KEYS"] == "order-5 cust-0"


def test_new_writes_continue_and_survive_a_restart(served: Served, client: BlockingClient) -> None:
    props = "UNIQ_KEY\x01NEW1\x02KEYS\x01fresh-1\x02TAGS\x01TagA"
    before = [m for m in served.msgs if m.topic == "Orders" and m.queue_id == 1]
    resp = call(client, served.addr, RequestCode.SEND_MESSAGE_V2, {
        "a": "pg", "b": "Orders", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": str(int(time.time() * 1000)),
        "h": "0", "i": props, "j": "0", "k": "false", "l": "16", "m": "false"}, b"after migration")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert int(resp.header["queueOffset"]) == len(before)
    assert resp.header["msgId"] == offset_msg_id("127.0.0.1", served.port, len(served.raw))
    served.stop()
    served.start()
    got = pull(client, served.addr, "Orders", 1, 0)
    assert got.body.startswith(b"".join(original(served, m) for m in before))
    new = decode_record(got.body, len(b"".join(original(served, m) for m in before)))
    assert (new.body, new.queue_offset, new.commit_log_offset) == (b"after migration", len(before), len(served.raw))
    found = call(client, served.addr, RequestCode.QUERY_MESSAGE, {
        "topic": "Orders", "key": "fresh-1", "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2 ** 62})
    assert found.code == ResponseCode.SUCCESS and b"after migration" in found.body
    old = call(client, served.addr, RequestCode.QUERY_MESSAGE, {
        "topic": "Orders", "key": "order-17", "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2 ** 62})
    assert old.body == original(served, served.msgs[17])
    # the files are still RocketMQ's: bare integer keys, a dataVersion object, every TopicConfig field
    offsets = (served.store / "config" / "consumerOffset.json").read_text()
    assert '"Orders@cg":{' in offsets.replace("\n", "").replace("\t", "")
    with pytest.raises(json.JSONDecodeError):
        json.loads(offsets)  # fastjson's {0:3}, which Python's json rejects
    assert dict(items(loads_fastjson(offsets)["offsetTable"]["Orders@cg"])) == OFFSETS["Orders@cg"]
    topics = loads_fastjson((served.store / "config" / "topics.json").read_text())
    assert set(topics["dataVersion"]) == {"counter", "timestamp"}
    assert topics["topicConfigTable"]["Orders"] == {
        "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": "Orders",
        "topicSysFlag": 0, "writeQueueNums": 4}
