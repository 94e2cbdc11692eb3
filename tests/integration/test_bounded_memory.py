"""Bounded broker memory against a real broker process: a client that never reads its responses (the broker's
RSS stays under a stated bound while other clients are served, on asyncio's loop and on uvloop), and each cap:
held pulls per connection, key-lookup results, receive/ack in-flight messages per group, snapshot lifetime, and
half messages whose producer group has no client."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.integration.cluster as cluster_mod
from broker_core.client import (
    AdminClient,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    SimpleConsumer,
    TransactionProducer,
    TransactionState,
)
from broker_core.client.message import decode_message_exts
from broker_core.codec.names import TRANS_OP_HALF_TOPIC
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.headers import PULL_SUBSCRIPTION, PULL_SUSPEND
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
HIGH, LOW = 1 * MiB, 256 * 1024
BODY = 64 * 1024
PER_PULL = 16  # messages a pull answers: a response of ~1 MiB
SLOW_SOCKETS = 4
PULLS_EACH = 100  # ~100 MiB of responses per socket (~400 MiB in all) if the broker buffered them
SLACK = 48 * MiB  # allocator and page-cache noise, the normal clients' work
BOUND = SLOW_SOCKETS * (HIGH + PER_PULL * (BODY + 512)) + SLACK  # the high-water mark plus one response each

CAPS = ("maxHeldPullsPerConnection=2\nmaxMsgsNumBatch=8\npopInflightMessageThreshold=5\n"
        "snapshotMaxLifetimeMs=60000\ntransactionCheckMax=2\ntransactionTimeOut=200\n"
        "transactionCheckInterval=200\n")


def vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def pull_request(opaque: int, topic: str, queue_id: int = 0, offset: int = 0, max_nums: int = PER_PULL,
                 suspend_ms: int = 0) -> bytes:
    header = {"consumerGroup": "slow-readers", "topic": topic, "queueId": queue_id, "queueOffset": offset,
              "maxMsgNums": max_nums, "sysFlag": PULL_SUBSCRIPTION | (PULL_SUSPEND if suspend_ms else 0),
              "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subscription": "*", "subVersion": 0,
              "expressionType": "TAG"}
    return RemotingCommand(RequestCode.PULL_MESSAGE, opaque, 0, header, b"").encode()


def read_responses(sock: socket.socket, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    while len(got) < count:
        data = sock.recv(1 << 20)
        assert data, "the broker closed the connection"
        got.extend(decoder.feed(data))
    return got


def connect(addr: str, rcvbuf: int | None = None) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(60)  # bounds a hang only
    sock.connect((host, int(port)))
    return sock


def loops() -> list[str]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "uvloop"]


@pytest.mark.parametrize("loop", loops())
def test_a_client_that_never_reads_keeps_the_broker_rss_bounded(tmp_path: Path, monkeypatch, loop: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(cluster_mod.ENV, "BROKER_CORE_EVENT_LOOP", loop)
    cluster = Cluster(tmp_path)
    slow: list[socket.socket] = []
    try:
        broker = cluster.add_brokers_registered({
            "broker-a": f"writeBufferHighWaterMark={HIGH}\nwriteBufferLowWaterMark={LOW}\n"}).brokers["broker-a"]
        assert broker.proc is not None
        with AdminClient(cluster.namesrv) as admin:
            admin.create_topic("Big", 1, 1)
            admin.create_topic("Small", 1, 1)
        producer = Producer("rss-producers", cluster.namesrv).start()
        consumer = PullConsumer("rss-consumers", cluster.namesrv).start()
        try:
            for i in range(PER_PULL):
                producer.send(Message("Big", os.urandom(BODY), keys=f"big-{i}"))
            warm = connect(broker.addr)  # the same pulls, read: the baseline includes what serving them costs
            warm.sendall(b"".join(pull_request(n, "Big") for n in range(1, 21)))
            assert all(len(decode_message_exts(r.body, "b")) == PER_PULL for r in read_responses(warm, 20))
            warm.close()
            baseline = vm_rss(broker.proc.pid)

            for _ in range(SLOW_SOCKETS):  # ~30 KB of requests each: all of it reaches the broker at once
                sock = connect(broker.addr, rcvbuf=64 * 1024)
                sock.sendall(b"".join(pull_request(n, "Big") for n in range(1, PULLS_EACH + 1)))
                slow.append(sock)

            # other clients are served meanwhile
            sent = [producer.send(Message("Small", f"small-{i}".encode())) for i in range(10)]
            (mq,) = consumer.fetch_queues("Small")
            got = consumer.pull(mq, 0, 32)
            assert [m.body for m in got.messages] == [f"small-{i}".encode() for i in range(10)]
            assert [m.msg_id for m in got.messages] == [s.msg_id for s in sent]

            with AdminClient(cluster.namesrv) as admin:
                wait_until(lambda: admin.broker_runtime(broker.addr)["connectionsPausedReading"] >= SLOW_SOCKETS,
                           timeout=60, what="the slow readers to be paused")
                runtime = admin.broker_runtime(broker.addr)
            rss = vm_rss(broker.proc.pid)
            print(f"{loop}: baseline {baseline / MiB:.1f} MiB, with {SLOW_SOCKETS} slow readers {rss / MiB:.1f} MiB "
                  f"(bound +{BOUND / MiB:.0f} MiB; unbounded would buffer "
                  f"~{SLOW_SOCKETS * PULLS_EACH * PER_PULL * BODY / MiB:.0f} MiB); unsent "
                  f"{runtime['unsentResponseBytes'] / MiB:.1f} MiB")
            assert rss <= baseline + BOUND, (rss - baseline) / MiB
            assert runtime["unsentResponseBytes"] <= SLOW_SOCKETS * (HIGH + PER_PULL * (BODY + 512))

            for sock in slow:  # once read, every response comes, in order: the broker resumed each one
                responses = read_responses(sock, PULLS_EACH)
                assert [r.opaque for r in responses] == list(range(1, PULLS_EACH + 1))
                assert all(r.code == ResponseCode.SUCCESS for r in responses)
                assert len(decode_message_exts(responses[-1].body, "b")) == PER_PULL
        finally:
            consumer.shutdown()
            producer.shutdown()
    finally:
        for sock in slow:
            sock.close()
        cluster.close()


# ---------------------------------------------------------------------------------------------------- caps
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("caps"))
    try:
        c.add_brokers_registered({"broker-a": CAPS})
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def broker_addr(cluster: Cluster) -> str:
    return cluster.brokers["broker-a"].addr


def test_held_pulls_past_the_cap_are_answered_at_once(cluster: Cluster, admin: AdminClient, producer: Producer,
                                                      broker_addr: str) -> None:
    admin.create_topic("Hold", 1, 1)
    sock = connect(broker_addr)
    try:
        sock.sendall(b"".join(pull_request(n, "Hold", max_nums=1, suspend_ms=15_000) for n in range(1, 5)))
        first = read_responses(sock, 2)  # pulls 3 and 4: past maxHeldPullsPerConnection=2
        assert sorted(r.opaque for r in first) == [3, 4]
        assert all(r.code == ResponseCode.PULL_NOT_FOUND for r in first)
        assert admin.broker_runtime(broker_addr)["heldRequests"] == 2
        producer.send(Message("Hold", b"wake"))
        held = read_responses(sock, 2)  # the two held pulls answer when the message arrives
        assert sorted(r.opaque for r in held) == [1, 2]
        assert all(r.code == ResponseCode.SUCCESS for r in held)
        wait_until(lambda: admin.broker_runtime(broker_addr)["heldRequests"] == 0, what="the slots to free")
    finally:
        sock.close()


def test_a_key_query_answers_at_most_max_msgs_num_batch(admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("Keys", 1, 1)
    for i in range(12):
        producer.send(Message("Keys", f"k-{i}".encode(), keys="same-key"))
    found, truncated = admin.query_message("Keys", "same-key", max_num=100)
    assert len(found) == 8 and truncated  # maxMsgsNumBatch=8
    assert {m.body for m in found} <= {f"k-{i}".encode() for i in range(12)}


def test_receives_stop_at_the_in_flight_threshold(cluster: Cluster, admin: AdminClient, producer: Producer,
                                                  broker_addr: str) -> None:
    admin.create_topic("PopCap", 1, 1)
    for i in range(8):
        producer.send(Message("PopCap", f"p-{i}".encode()))
    sc = SimpleConsumer("popcap-group", cluster.namesrv).start()
    sc.subscribe("PopCap")
    client = BlockingClient()
    try:
        first = sc.receive(max_num=8, invisible_duration=60)
        assert [m.body for m in first] == [f"p-{i}".encode() for i in range(5)]  # popInflightMessageThreshold=5
        resp = client.invoke(broker_addr, RemotingCommand.request(RequestCode.POP_MESSAGE, {
            "consumerGroup": "popcap-group", "topic": "PopCap", "maxMsgNums": 8, "invisibleTime": 60_000,
            "pollTime": 10_000, "queueId": -1, "bornTime": int(time.time() * 1000), "initMode": 0}))
        # answered at once (not held), with RocketMQ 5's empty-POP code and the reason in the remark
        assert resp.code == ResponseCode.POLLING_TIMEOUT and "popInflightMessageThreshold" in resp.remark
        for m in first[:2]:
            sc.ack(m)
        more = sc.receive(max_num=8, invisible_duration=60)
        assert [m.body for m in more] == [b"p-5", b"p-6"]
        assert admin.broker_runtime(broker_addr)["popInflightMessages"] == 5
    finally:
        client.close()
        sc.shutdown()


def test_a_snapshot_lives_at_most_snapshot_max_lifetime(producer: Producer, broker_addr: str) -> None:
    producer.send(Message("Keys", b"for-a-snapshot"))
    client = BlockingClient()
    try:
        resp = client.invoke(broker_addr, RemotingCommand.request(RequestCode.SNAPSHOT_SEGMENTS, {
            "ttlMs": 10 ** 12}))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        manifest = json.loads(resp.body)
        assert manifest["expiresMs"] - manifest["createdMs"] == 60_000  # snapshotMaxLifetimeMs
        assert manifest["segments"]
    finally:
        client.close()


def test_a_half_message_whose_producer_group_has_no_client_is_rolled_back(cluster: Cluster, admin: AdminClient,
                                                                           broker_addr: str) -> None:
    admin.create_topic("TxGone", 1, 1)
    tp = TransactionProducer("gone-producers", cluster.namesrv, lambda msg: TransactionState.UNKNOW).start()
    try:
        result, _ = tp.send_message_in_transaction(Message("TxGone", b"never-decided"),
                                                   lambda msg, arg: TransactionState.UNKNOW)
    finally:
        tp.shutdown()  # the group's only producer is gone
    half_offset = result.queue_offset
    client = BlockingClient()

    def ops() -> list[MessageExt]:
        resp = client.invoke(broker_addr, RemotingCommand(RequestCode.PULL_MESSAGE, 0, 0, {
            "consumerGroup": "op-reader", "topic": TRANS_OP_HALF_TOPIC, "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 256, "sysFlag": PULL_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0}, b""))
        return decode_message_exts(resp.body, "b") if resp.code == ResponseCode.SUCCESS else []

    try:
        wait_until(lambda: any(m.body == str(half_offset).encode() for m in ops()), timeout=60,
                   what="the half message to be rolled back")
        (op,) = [m for m in ops() if m.body == str(half_offset).encode()]
        assert op.properties["OP"] == "rollback"
        consumer = PullConsumer("txgone-readers", cluster.namesrv).start()
        try:
            (mq,) = consumer.fetch_queues("TxGone")
            assert consumer.pull(mq, 0).messages == []  # never committed
        finally:
            consumer.shutdown()
    finally:
        client.close()
