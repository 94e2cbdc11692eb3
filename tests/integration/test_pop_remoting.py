"""RocketMQ 5's POP over remoting, spoken with raw frames built field by field from RocketMQ 5's header classes
(``PopMessageRequestHeader``, ``AckMessageRequestHeader``, ``ChangeInvisibleTimeRequestHeader``,
``PeekMessageRequestHeader``, ``NotificationRequestHeader``, ``PollingInfoRequestHeader``, the
``BatchAckMessageRequestBody``), a JSON-serialized command as the Java client writes it, over a plain socket.
Receipt handles (``extraInfo``) are built from the POP answer as ``MQClientAPIImpl.processPopResponse`` does."""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.codec.message import decode_record
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

POP_MESSAGE, ACK_MESSAGE, PEEK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME = 200050, 200051, 200052, 200053
NOTIFICATION, POLLING_INFO, BATCH_ACK_MESSAGE = 200054, 200055, 200151
SUCCESS, TOPIC_NOT_EXIST, PULL_NOT_FOUND, INVALID_PARAMETER = 0, 17, 19, 29
NO_MESSAGE, POLLING_TIMEOUT = 208, 210


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("pop-remoting"))
    try:
        c.add_brokers_registered({"broker-a": ""})
        yield c
    finally:
        c.close()


class RawClient:
    """One TCP connection; commands framed by hand: int total, int JSON header length (serialize type 0), the
    RemotingCommand JSON as RocketMQ's Java client writes it (extFields all strings), the body."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.opaque = 0

    def close(self) -> None:
        self.sock.close()

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    def call(self, code: int, fields: dict[str, Any], body: bytes = b"") -> tuple[int, str, dict[str, str], bytes]:
        self.opaque += 1
        header = json.dumps({"code": code, "language": "JAVA", "version": 453, "opaque": self.opaque, "flag": 0,
                             "extFields": {k: str(v).lower() if isinstance(v, bool) else str(v)
                                           for k, v in fields.items()},
                             "serializeTypeCurrentRPC": "JSON"}).encode()
        self.sock.sendall(struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body)
        total, mark = struct.unpack(">ii", self._read(8))
        assert mark >> 24 == 0, "answered in the JSON form the request used"
        head = json.loads(self._read(mark & 0xFFFFFF))
        rest = self._read(total - 4 - (mark & 0xFFFFFF))
        assert head["opaque"] == self.opaque and head["flag"] & 1
        return int(head["code"]), str(head.get("remark") or ""), dict(head.get("extFields") or {}), rest


def records(body: bytes) -> list[Any]:
    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos)
        out.append(rec)
        pos += rec.store_size
    return out


def extra_infos(fields: dict[str, str], recs: list[Any], broker: str) -> list[str]:
    """``processPopResponse``: ``ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId offset``,
    the checkpoint start from ``startOffsetInfo`` and the offset from ``msgOffsetInfo`` by ``retry@queueId``."""
    def parse(text: str) -> dict[str, str]:
        return {f"{a}@{b}": c for a, b, c in (e.split(" ") for e in text.split(";") if e)}
    start, offsets = parse(fields["startOffsetInfo"]), parse(fields["msgOffsetInfo"])
    seen: dict[str, int] = {}
    out = []
    for rec in recs:
        key = f"0@{rec.queue_id}"
        index = seen.get(key, 0)
        seen[key] = index + 1
        offset = offsets[key].split(",")[index]
        assert int(offset) == rec.queue_offset
        out.append(" ".join([start[key], fields["popTime"], fields["invisibleTime"], fields["reviveQid"], "0", broker,
                             str(rec.queue_id), offset]))
    return out


def pop_header(group: str, topic: str, invisible_ms: int, poll_ms: int = 0, max_nums: int = 32) -> dict[str, Any]:
    return {"consumerGroup": group, "topic": topic, "queueId": -1, "maxMsgNums": max_nums,
            "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
            "initMode": 0, "expType": "TAG", "exp": "*", "order": False, "attemptId": str(uuid.uuid4())}


def ack_header(group: str, topic: str, extra: str) -> dict[str, Any]:
    parts = extra.split(" ")
    return {"consumerGroup": group, "topic": topic, "queueId": int(parts[6]), "extraInfo": extra,
            "offset": int(parts[7])}


def bitset(indexes: list[int]) -> str:
    data = bytearray(max(indexes) // 8 + 1)
    for i in indexes:
        data[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(data)).decode()  # BitSet.toByteArray() as fastjson writes a byte[]


def test_pop_ack_change_batch_ack_and_redelivery(cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("PopRaw", 2, 2, brokers=["broker-a"])
    for i in range(6):
        producer.send(Message("PopRaw", f"raw-{i}".encode()))
    group, broker = "g-pop-raw", "broker-a"
    c = RawClient(cluster.brokers[broker].addr)
    try:
        code, remark, _, _ = c.call(POP_MESSAGE, pop_header(group, "PopRaw", 2000, max_nums=33))
        assert code == INVALID_PARAMETER and "greater than 32" in remark
        code, _, _, _ = c.call(POP_MESSAGE, pop_header(group, "NoSuchTopic", 2000))
        assert code == TOPIC_NOT_EXIST

        code, remark, fields, body = c.call(POP_MESSAGE, pop_header(group, "PopRaw", 2000))
        assert (code, remark) == (SUCCESS, "FOUND")
        recs = records(body)
        assert sorted(r.body for r in recs) == [f"raw-{i}".encode() for i in range(6)]
        assert all(r.reconsume_times == 0 for r in recs)
        assert fields["invisibleTime"] == "2000" and fields["restNum"] == "0"
        assert int(fields["popTime"]) > 1_600_000_000_000 and 0 <= int(fields["reviveQid"]) < 999  # epoch ms
        handles = dict(zip((r.body for r in recs), extra_infos(fields, recs, broker), strict=True))

        code, _, fields, _ = c.call(POP_MESSAGE, pop_header(group, "PopRaw", 2000))
        assert code == POLLING_TIMEOUT and fields["restNum"] == "0"  # all in flight, none new

        assert c.call(ACK_MESSAGE, ack_header(group, "PopRaw", handles[b"raw-0"]))[0] == SUCCESS
        code, remark, _, _ = c.call(ACK_MESSAGE, ack_header(group, "PopRaw", handles[b"raw-0"]))
        assert code == NO_MESSAGE and "already used" in remark
        bad = {**ack_header(group, "PopRaw", handles[b"raw-1"]), "offset": 1000}
        code, remark, _, _ = c.call(ACK_MESSAGE, bad)
        assert code == NO_MESSAGE and "offset is illegal" in remark

        # change the invisible time: the answer's popTime makes the new handle, the old one dies
        old = handles[b"raw-1"]
        code, _, changed, _ = c.call(CHANGE_MESSAGE_INVISIBLETIME,
                                     {**ack_header(group, "PopRaw", old), "invisibleTime": 60_000})
        assert code == SUCCESS and changed["invisibleTime"] == "60000"
        assert int(changed["popTime"]) > int(old.split(" ")[1])
        parts = old.split(" ")
        new = " ".join([parts[7], changed["popTime"], changed["invisibleTime"], changed["reviveQid"], "0", broker,
                        parts[6], parts[7]])
        assert c.call(ACK_MESSAGE, ack_header(group, "PopRaw", old))[0] == NO_MESSAGE

        # batch ack raw-2 and raw-3 (offsets from their checkpoint's start, as BatchAck's bitSet)
        acks = []
        for name in (b"raw-2", b"raw-3"):
            p = handles[name].split(" ")
            acks.append({"c": group, "t": "PopRaw", "r": "0", "so": int(p[0]), "q": int(p[6]), "rq": int(p[3]),
                         "pt": int(p[1]), "it": int(p[2]), "b": bitset([int(p[7]) - int(p[0])])})
        code, _, _, _ = c.call(BATCH_ACK_MESSAGE, {}, json.dumps({"acks": acks, "brokerName": broker}).encode())
        assert code == SUCCESS
        for name in (b"raw-2", b"raw-3"):
            assert c.call(ACK_MESSAGE, ack_header(group, "PopRaw", handles[name]))[0] == NO_MESSAGE  # done already

        # raw-4 and raw-5 were never acked: back after their 2 s, counted in RECONSUMETIMES; raw-1 stays invisible
        again: list[Any] = []

        def poll() -> bool:
            code, _, f, b = c.call(POP_MESSAGE, pop_header(group, "PopRaw", 60_000))
            if code == SUCCESS:
                again.extend(zip(records(b), extra_infos(f, records(b), broker), strict=True))
            return len(again) >= 2
        wait_until(poll, timeout=30, what="the unacked messages to come back")
        assert sorted(r.body for r, _ in again) == [b"raw-4", b"raw-5"]
        assert all(r.reconsume_times == 1 for r, _ in again)
        for _, extra in again:
            assert c.call(ACK_MESSAGE, ack_header(group, "PopRaw", extra))[0] == SUCCESS
        assert c.call(ACK_MESSAGE, ack_header(group, "PopRaw", new))[0] == SUCCESS

        # everything acked: PEEK finds nothing from the committed offsets, and the group's offsets reached the end
        code, _, fields, _ = c.call(PEEK_MESSAGE, {"consumerGroup": group, "topic": "PopRaw", "queueId": -1,
                                                   "maxMsgNums": 32})
        assert code == PULL_NOT_FOUND and fields["restNum"] == "0"
        stats = admin.consume_stats(group, "PopRaw")
        assert sum(q["consumerOffset"] for q in stats["offsetTable"]) == 6
    finally:
        c.close()


def test_peek_changes_nothing_and_notification_and_polling_info(cluster: Cluster, admin: AdminClient,
                                                                producer: Producer) -> None:
    admin.create_topic("PopPeek", 1, 1, brokers=["broker-a"])
    group = "g-pop-peek"
    c = RawClient(cluster.brokers["broker-a"].addr)
    waiter = RawClient(cluster.brokers["broker-a"].addr)
    try:
        note = {"consumerGroup": group, "topic": "PopPeek", "queueId": -1, "pollTime": 0,
                "bornTime": int(time.time() * 1000), "order": False, "attemptId": str(uuid.uuid4())}
        code, _, fields, _ = c.call(NOTIFICATION, note)
        assert code == SUCCESS and fields["hasMsg"] == "false"
        info = {"consumerGroup": group, "topic": "PopPeek", "queueId": -1}
        assert c.call(POLLING_INFO, info)[2]["pollingNum"] == "0"

        # a POP held on the empty topic shows in POLLING_INFO, and a send wakes it
        result: dict[str, Any] = {}
        def held_pop() -> None:
            answer = waiter.call(POP_MESSAGE, pop_header(group, "PopPeek", 30_000, 20_000))
            result.update(zip(("code", "remark", "fields", "body"), answer, strict=True))
        held = threading.Thread(target=held_pop)
        held.start()
        wait_until(lambda: c.call(POLLING_INFO, info)[2]["pollingNum"] == "1", timeout=30, what="the held POP")
        producer.send(Message("PopPeek", b"woke"))
        held.join(30)
        assert result["code"] == SUCCESS and [r.body for r in records(result["body"])] == [b"woke"]
        assert c.call(POLLING_INFO, info)[2]["pollingNum"] == "0"

        producer.send(Message("PopPeek", b"second"))
        assert c.call(NOTIFICATION, note)[2]["hasMsg"] == "true"
        peek = {"consumerGroup": group, "topic": "PopPeek", "queueId": 0, "maxMsgNums": 32}
        code, _, _, body = c.call(PEEK_MESSAGE, peek)  # from the committed offset: "woke" is in flight, not acked
        assert code == SUCCESS and [r.body for r in records(body)] == [b"woke", b"second"]
        assert [r.body for r in records(c.call(PEEK_MESSAGE, peek)[3])] == [b"woke", b"second"]  # unchanged
        code, _, _, body = c.call(POP_MESSAGE, pop_header(group, "PopPeek", 30_000))
        assert code == SUCCESS and [r.body for r in records(body)] == [b"second"]
    finally:
        c.close()
        waiter.close()


def test_order_pop_blocks_a_queue_until_acked_and_counts_in_order_count_info(
        cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    admin.create_topic("PopOrder", 1, 1, brokers=["broker-a"])
    for i in range(3):
        producer.send(Message("PopOrder", f"o-{i}".encode()))
    group, broker = "g-pop-order", "broker-a"
    c = RawClient(cluster.brokers[broker].addr)
    try:
        order = {**pop_header(group, "PopOrder", 1500, max_nums=2), "order": True}
        code, _, fields, body = c.call(POP_MESSAGE, order)
        recs = records(body)
        assert code == SUCCESS and [r.body for r in recs] == [b"o-0", b"o-1"]
        assert fields["reviveQid"] == "999"  # KeyBuilder.POP_ORDER_REVIVE_QUEUE
        assert fields["orderCountInfo"] == "0 qo0%0 0;0 qo0%1 0"  # buildQueueOffsetOrderCountInfo per message
        handles = extra_infos(fields, recs, broker)
        # the queue is locked while o-0 and o-1 are in flight: o-2 waits
        assert c.call(POP_MESSAGE, {**order, "bornTime": int(time.time() * 1000)})[0] == POLLING_TIMEOUT
        assert c.call(ACK_MESSAGE, ack_header(group, "PopOrder", handles[0]))[0] == SUCCESS
        # o-1 not acked: after its invisible time the queue gives it again first, counted in orderCountInfo
        again: dict[str, Any] = {}

        def poll() -> bool:
            code, _, f, b = c.call(POP_MESSAGE, {**order, "bornTime": int(time.time() * 1000)})
            if code == SUCCESS:
                again.update(fields=f, recs=records(b))
            return bool(again)
        wait_until(poll, timeout=30, what="o-1 to come back")
        assert [r.body for r in again["recs"]] == [b"o-1", b"o-2"]
        assert again["fields"]["orderCountInfo"] == "0 qo0%1 1;0 qo0%2 0"
        assert again["recs"][0].reconsume_times == 1
    finally:
        c.close()


def test_init_mode_max_starts_a_new_group_at_the_queue_end(cluster: Cluster, admin: AdminClient,
                                                           producer: Producer) -> None:
    admin.create_topic("PopInit", 1, 1, brokers=["broker-a"])
    producer.send(Message("PopInit", b"before"))
    c = RawClient(cluster.brokers["broker-a"].addr)
    try:
        header = {**pop_header("g-pop-init", "PopInit", 30_000), "initMode": 1}  # ConsumeInitMode.MAX
        assert c.call(POP_MESSAGE, header)[0] == POLLING_TIMEOUT
        producer.send(Message("PopInit", b"after"))
        code, _, _, body = c.call(POP_MESSAGE, {**header, "bornTime": int(time.time() * 1000)})
        assert code == SUCCESS and [r.body for r in records(body)] == [b"after"]
    finally:
        c.close()
