"""Registration that scales: 50k topics of 8 queues created in batches (UPDATE_AND_CREATE_TOPIC_LIST), registered
with the name server compressed (``compressedRegister``), routed, kept across a broker restart; a periodic
heartbeat with an unchanged topic DataVersion is QUERY_DATA_VERSION only (``forceRegister=false``), counted on the
wire by a relay between the broker and the name server."""

from __future__ import annotations

import json
import socket
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient, run_sync
from broker_core.server.topic_batch import UPDATE_AND_CREATE_TOPIC_LIST
from tests.integration.cluster import BrokerProcess, _start, stop_process, wait_until

TOPICS = 50_000
QUEUES = 8
BATCH = 10_000
SAMPLE = [0, 1, 777, 12_345, 33_333, TOPICS - 1]


def topic(i: int) -> str:
    return f"ScaleTopic{i:05d}"


@dataclass
class Frame:
    code: int
    size: int  # bytes on the wire, length prefix included
    header: dict[str, object]
    body: bytes


class CountingRelay:
    """Forwards TCP to ``target`` and records every frame the broker sends (request code, size, header, body)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frames: list[Frame] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [conn, upstream]
            threading.Thread(target=self._pump, args=(conn, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = b""
        while True:
            try:
                data = src.recv(1 << 20)
                if not data:
                    break
                dst.sendall(data)
            except OSError:
                break
            if record:
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    total = struct.unpack(">i", buf[:4])[0]
                    frame, buf = buf[4:4 + total], buf[4 + total:]
                    hlen = struct.unpack(">i", frame[:4])[0] & 0xFFFFFF
                    header = json.loads(frame[4:4 + hlen])
                    with self.lock:
                        self.frames.append(Frame(int(header["code"]), total + 4, header.get("extFields") or {},
                                                 frame[4 + hlen:]))
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def taken(self) -> list[Frame]:
        with self.lock:
            out, self.frames = self.frames, []
        return out

    def close(self) -> None:
        for s in self.sockets:
            s.close()


@pytest.fixture
def relay_and_namesrv(tmp_path: Path) -> Iterator[tuple[CountingRelay, str]]:
    proc, port = _start(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0"], tmp_path / "namesrv.log")
    relay = CountingRelay(("127.0.0.1", port))
    try:
        yield relay, f"127.0.0.1:{port}"
    finally:
        relay.close()
        stop_process(proc)


def _routes_ok(client: RemotingClient, namesrv: str, names: list[str]) -> bool:
    for name in names:
        resp = client.invoke_sync(namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                   {"topic": name}), 30)
        if resp.code != ResponseCode.SUCCESS:
            return False
        queues = json.loads(resp.body)["queueDatas"]
        assert queues[0]["writeQueueNums"] == QUEUES and queues[0]["readQueueNums"] == QUEUES
    return True


def _wait_heartbeats(relay: CountingRelay, count: int) -> list[Frame]:
    frames: list[Frame] = []

    def enough() -> bool:
        frames.extend(relay.taken())
        return sum(f.code == RequestCode.QUERY_DATA_VERSION for f in frames) >= count

    wait_until(enough, timeout=120, what=f"{count} periodic heartbeats")
    return frames


def test_fifty_thousand_topics_register_compressed_route_and_survive_a_restart(
        tmp_path: Path, relay_and_namesrv: tuple[CountingRelay, str]) -> None:
    relay, namesrv = relay_and_namesrv
    store = tmp_path / "store"
    store.mkdir()
    broker = BrokerProcess("scale-a", store, f"127.0.0.1:{relay.port}", tmp_path / "broker.log",
                           "compressedRegister=true\nforceRegister=false\n")
    client = RemotingClient()
    try:
        broker.start()
        for start in range(0, TOPICS, BATCH):
            body = json.dumps({"topicConfigList": [
                {"topicName": topic(i), "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
                for i in range(start, start + BATCH)]}).encode()
            resp = client.invoke_sync(broker.addr, RemotingCommand.request(UPDATE_AND_CREATE_TOPIC_LIST, {}, body),
                                      120)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert _routes_ok(client, namesrv, [topic(i) for i in SAMPLE])

        registrations = [f for f in relay.taken() if f.code == RequestCode.REGISTER_BROKER]
        last = registrations[-1]
        assert str(last.header["compressed"]).lower() == "true"
        assert int(str(last.header["bodyCrc32"])) == zlib.crc32(last.body) & 0x7FFFFFFF
        raw = zlib.decompress(last.body)
        vlen = struct.unpack(">i", raw[:4])[0]
        version = json.loads(raw[4:4 + vlen])  # [len][DataVersion][count][len][topic line]...
        assert TOPICS < struct.unpack(">i", raw[4 + vlen:8 + vlen])[0] <= TOPICS + 10  # + the broker's own (TBW102)
        assert len(last.body) * 10 < len(raw)  # deflated: the topic lines repeat

        # unchanged heartbeats: QUERY_DATA_VERSION with the registered DataVersion, no topic table
        frames = _wait_heartbeats(relay, 2)
        steady = frames[[f.code for f in frames].index(RequestCode.QUERY_DATA_VERSION):]
        assert {f.code for f in steady} == {RequestCode.QUERY_DATA_VERSION}
        assert max(f.size for f in steady) < 10 * 1024
        assert json.loads(steady[-1].body)["counter"] == version["counter"]

        # a change is registered in full again (code 17: one topic)
        resp = client.invoke_sync(broker.addr, RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "ScaleTopicLate", "readQueueNums": QUEUES,
                                                  "writeQueueNums": QUEUES, "perm": 6}), 60)
        assert resp.code == ResponseCode.SUCCESS
        assert RequestCode.REGISTER_BROKER in {f.code for f in relay.taken()}
        assert _routes_ok(client, namesrv, ["ScaleTopicLate"])

        # restart: the broker unregisters, comes back with its 50k topics from topics.json and registers them
        assert broker.stop() == 0
        resp = client.invoke_sync(namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                   {"topic": topic(1)}), 30)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        broker.start()
        wait_until(lambda: _routes_ok(client, namesrv, [topic(i) for i in SAMPLE] + ["ScaleTopicLate"]),
                   timeout=120, what="routes after the restart")
        listed = client.invoke_sync(namesrv, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
                                                                     {}), 60)
        names = set(json.loads(listed.body)["topicList"])
        assert {topic(i) for i in range(TOPICS)} <= names
    finally:
        run_sync(client.close())
        broker.stop()


def test_topics_json_holds_a_topic_acknowledged_just_before_a_kill(
        tmp_path: Path, relay_and_namesrv: tuple[CountingRelay, str]) -> None:
    """Code 17 answers once topics.json holds the topic (written off the broker's event loop since the table
    is joined from cached entries): SIGKILL right after each answer, the file (or its .bak fallback) has it, and
    the restarted broker serves it."""
    from broker_core.codec.config_file import read_config_file

    relay, _namesrv = relay_and_namesrv
    store = tmp_path / "store"
    store.mkdir()
    broker = BrokerProcess("kill-a", store, f"127.0.0.1:{relay.port}", tmp_path / "broker.log",
                           "compressedRegister=true\n")
    client = RemotingClient()
    try:
        broker.start()
        body = json.dumps({"topicConfigList": [
            {"topicName": topic(i), "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
            for i in range(2000)]}).encode()
        assert client.invoke_sync(broker.addr, RemotingCommand.request(UPDATE_AND_CREATE_TOPIC_LIST, {}, body),
                                  120).code == ResponseCode.SUCCESS
        for round_ in range(3):
            name = f"AckedThenKilled{round_}"
            resp = client.invoke_sync(broker.addr, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": name, "readQueueNums": 2, "writeQueueNums": 2,
                                                      "perm": 6}), 60)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            broker.kill()
            doc = read_config_file(store / "config" / "topics.json")
            assert doc is not None and name in doc["topicConfigTable"]
            assert topic(1999) in doc["topicConfigTable"]
            broker.start()
            got = client.invoke_sync(broker.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), 60)
            table = json.loads(got.body)["topicConfigTable"]
            assert {f"AckedThenKilled{r}" for r in range(round_ + 1)} <= set(table)
            assert table[name]["writeQueueNums"] == 2
    finally:
        run_sync(client.close())
        broker.stop()
