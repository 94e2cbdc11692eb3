"""The name server process: READY line, registration and routes over TCP, expiry, bad frames, SIGTERM, --help."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient, run_sync
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
FAST_EXPIRY = ("--scan-interval-ms", "200", "--broker-expire-ms", "1000")
DEADLINE_S = 30.0


class Namesrv:
    def __init__(self, proc: subprocess.Popen[str], port: int, stderr_path: Path) -> None:
        self.proc = proc
        self.port = port
        self.addr = f"127.0.0.1:{port}"
        self.stderr_path = stderr_path

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def read_line(proc: subprocess.Popen[str], timeout: float = DEADLINE_S) -> str:
    """The next stdout line, or '' if none arrives in time (never blocks the test forever)."""
    assert proc.stdout is not None
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    return result[0] if result else ""


@pytest.fixture
def start_namesrv(tmp_path: Path) -> Iterator[Callable[..., Namesrv]]:
    started: list[Namesrv] = []

    def start(*extra: str) -> Namesrv:
        stderr_path = tmp_path / f"namesrv-{len(started)}.log"
        with stderr_path.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "broker_core.namesrv", "--listen", "127.0.0.1:0", *extra],
                                    cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=err, text=True)
        line = read_line(proc)
        if not line.startswith("READY port="):
            proc.kill()
            proc.wait()
            pytest.fail(f"no READY line: {line!r}\n{stderr_path.read_text()}")
        srv = Namesrv(proc, int(line.split("=", 1)[1]), stderr_path)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        if srv.proc.poll() is None:
            srv.proc.kill()
        srv.proc.wait()
        assert srv.proc.stdout is not None
        srv.proc.stdout.close()


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    c = RemotingClient()
    yield c
    run_sync(c.close())


def invoke(client: RemotingClient, srv: Namesrv, code: int, header: dict | None = None,
           body: object = None) -> RemotingCommand:
    raw = json.dumps(body).encode() if body is not None else b""
    return run_sync(client.invoke(srv.addr, RemotingCommand.request(code, header, raw), timeout=10.0), 30)


def register(client: RemotingClient, srv: Namesrv, broker_name: str, addr: str, topics: dict[str, int],
             broker_id: int = 0, cluster: str = "DefaultCluster") -> RemotingCommand:
    header = {"clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id, "brokerAddr": addr}
    table = {t: {"readQueueNums": n, "writeQueueNums": n, "perm": 6} for t, n in topics.items()}
    return invoke(client, srv, RequestCode.REGISTER_BROKER, header, {"topicConfigTable": table})


def route(client: RemotingClient, srv: Namesrv, topic: str) -> RemotingCommand:
    return invoke(client, srv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def cluster_info(client: RemotingClient, srv: Namesrv) -> dict:
    resp = invoke(client, srv, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return json.loads(resp.body)


def test_register_route_and_expiry(start_namesrv, client):
    srv = start_namesrv(*FAST_EXPIRY)
    addr = "127.0.0.1:10911"
    # register and look up right away; retried so a stalled machine (> 1 s between the two) cannot fail it
    deadline = time.monotonic() + DEADLINE_S
    while True:
        assert register(client, srv, "broker-a", addr, {"orders": 4}).code == ResponseCode.SUCCESS
        resp = route(client, srv, "orders")
        if resp.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
            break
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert json.loads(resp.body) == {
        "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                        "topicSysFlag": 0, "topicSynFlag": 0}],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": addr}}],
        "filterServerTable": {},
    }
    # no more heartbeats: the scan removes it
    deadline = time.monotonic() + DEADLINE_S
    while route(client, srv, "orders").code == ResponseCode.SUCCESS:
        assert time.monotonic() < deadline, "broker did not expire"
        time.sleep(0.1)
    resp = route(client, srv, "orders")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == "No topic route info in name server for the topic: orders"
    assert cluster_info(client, srv) == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert f"broker {addr} expired" in srv.log()


def test_unregister_topic_list_delete_and_errors(start_namesrv, client):
    srv = start_namesrv()  # default expiry (120 s): nothing expires during this test
    assert register(client, srv, "broker-a", "127.0.0.1:10911", {"t1": 4, "t2": 2}).code == ResponseCode.SUCCESS
    assert register(client, srv, "broker-b", "127.0.0.1:10921", {"t2": 8}).code == ResponseCode.SUCCESS
    resp = invoke(client, srv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert json.loads(resp.body) == {"topicList": ["t1", "t2"]}
    info = cluster_info(client, srv)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
    assert set(info) == {"brokerAddrTable", "clusterAddrTable"}  # RocketMQ's ClusterInfo, nothing else

    header = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0,
              "brokerAddr": "127.0.0.1:10911"}
    assert invoke(client, srv, RequestCode.UNREGISTER_BROKER, header).code == ResponseCode.SUCCESS
    assert route(client, srv, "t1").code == ResponseCode.TOPIC_NOT_EXIST
    assert [q["brokerName"] for q in json.loads(route(client, srv, "t2").body)["queueDatas"]] == ["broker-b"]
    assert list(cluster_info(client, srv)["brokerAddrTable"]) == ["broker-b"]

    assert invoke(client, srv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "t2"}).code == ResponseCode.SUCCESS
    assert route(client, srv, "t2").code == ResponseCode.TOPIC_NOT_EXIST

    resp = route(client, srv, "bad topic")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "may only contain" in resp.remark
    resp = invoke(client, srv, RequestCode.REGISTER_BROKER, {"clusterName": "c", "brokerName": "x", "brokerId": 0})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerAddr" in resp.remark
    resp = invoke(client, srv, RequestCode.SEND_MESSAGE, {"topic": "t"})
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_malformed_frame_closes_only_that_connection(start_namesrv, client):
    srv = start_namesrv()
    assert register(client, srv, "broker-a", "127.0.0.1:10911", {"t": 4}).code == ResponseCode.SUCCESS
    with socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE_S) as raw:
        raw.sendall(b"\x00\x00\x00\x20\x09garbage-garbage-garbage-garbage!")  # serialize type 9
        received = b""
        while chunk := raw.recv(4096):  # the server closes without a reply (EOF), as RocketMQ does
            received += chunk
    assert received == b""
    # the client's connection, open all along, still works
    assert route(client, srv, "t").code == ResponseCode.SUCCESS
    other = RemotingClient()
    try:
        assert route(other, srv, "t").code == ResponseCode.SUCCESS
    finally:
        run_sync(other.close())


def test_sigterm_exits_cleanly(start_namesrv, client):
    srv = start_namesrv()
    assert register(client, srv, "broker-a", "127.0.0.1:10911", {"t": 4}).code == ResponseCode.SUCCESS
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=DEADLINE_S) == 0, srv.log()
    assert srv.proc.stdout is not None and srv.proc.stdout.read() == ""  # READY was the only stdout line


def test_sigint_exits_cleanly(start_namesrv):
    srv = start_namesrv()
    srv.proc.send_signal(signal.SIGINT)
    assert srv.proc.wait(timeout=DEADLINE_S) == 0, srv.log()


def test_help_lists_every_option():
    out = subprocess.run([sys.executable, "-m", "broker_core.namesrv", "--help"], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.returncode == 0
    for option in ("--listen", "--scan-interval-ms", "--broker-expire-ms", "--log-level", "127.0.0.1:9876",
                   "120000", "10000"):
        assert option in out.stdout


def test_bad_arguments_exit_2():
    out = subprocess.run([sys.executable, "-m", "broker_core.namesrv", "--listen", "nohost"], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.returncode == 2 and "HOST:PORT" in out.stderr
    assert out.stdout == ""


# -- RocketMQ 4.9 wire compatibility over a raw socket (reference §2.2, §5.1-5.2, §7.5, §8.5) ------------------
# Frames are built by hand exactly as Java's RemotingCommand (fastjson header, string extFields) and client-go
# (language GO, version 317, remark "") write them; answers are read raw, so the checks see the exact bytes.

JAVA_VERSION = 409  # 4.9.8
GO_VERSION = 317
TOPIC_CONFIG = {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                "writeQueueNums": 4}


class RawPeer:
    """One TCP connection speaking RocketMQ's JSON-typed remoting frame, nothing of ours in between."""

    def __init__(self, srv: Namesrv, language: str = "JAVA", version: int = JAVA_VERSION) -> None:
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE_S)
        self.language, self.version, self.opaque = language, version, 0

    def close(self) -> None:
        self.sock.close()

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed by the name server"
            out += chunk
        return out

    def call(self, code: int, ext: dict[str, object] | None = None, body: bytes = b"") -> tuple[dict, bytes]:
        """Send one request (every extFields value as a string, as Java/Go do); returns (header JSON, body)."""
        self.opaque += 1
        header: dict[str, object] = {"code": code, "flag": 0, "language": self.language, "opaque": self.opaque,
                                     "version": self.version}
        if ext is not None:
            header["extFields"] = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in ext.items()}
        if self.language == "JAVA":
            header["serializeTypeCurrentRPC"] = "JSON"
        else:
            header["remark"] = ""
        raw = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
        self.sock.sendall((4 + len(raw) + len(body)).to_bytes(4, "big") + len(raw).to_bytes(4, "big") + raw + body)
        length = int.from_bytes(self._read(4), "big")
        word = int.from_bytes(self._read(4), "big")
        assert word >> 24 == 0, "a JSON request gets a JSON-typed answer"
        header_len = word & 0xFFFFFF
        resp = json.loads(self._read(header_len))
        assert resp["opaque"] == self.opaque and resp["flag"] & 1 == 1
        for key, value in (resp.get("extFields") or {}).items():
            assert isinstance(value, str), f"extFields[{key}] must be a string for client-go, got {value!r}"
        return resp, self._read(length - 4 - header_len)


def register_body(topics: dict[str, dict[str, object]], counter: int = 1, timestamp: int = 1700000000000) -> bytes:
    """``RegisterBrokerBody`` as fastjson writes it in ``BrokerOuterAPI.registerBrokerAll``."""
    table = {t: {**TOPIC_CONFIG, "topicName": t, **cfg} for t, cfg in topics.items()}
    return json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "timestamp": timestamp}, "topicConfigTable": table}},
        separators=(",", ":"), sort_keys=True).encode()


def register_ext(name: str, addr: str, body: bytes, broker_id: int = 0, ha: str = "", crc: int | None = None,
                 cluster: str = "DefaultCluster", compressed: bool = False) -> dict[str, object]:
    return {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": ha,
            "brokerId": broker_id, "compressed": compressed,
            "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc}


def java_register(peer: RawPeer, name: str, addr: str, topics: dict[str, dict[str, object]] | None = None,
                  **kw: object) -> tuple[dict, bytes]:
    counter = int(kw.pop("counter", 1))  # type: ignore[call-overload]
    body = register_body(topics or {}, counter)
    return peer.call(RequestCode.REGISTER_BROKER, register_ext(name, addr, body, **kw), body)  # type: ignore[arg-type]


@pytest.fixture
def peer(start_namesrv) -> Iterator[tuple[Namesrv, RawPeer]]:
    srv = start_namesrv()
    p = RawPeer(srv)
    yield srv, p
    p.close()


def test_java_registration_and_exact_route_body(peer):
    srv, java = peer
    head, body = java_register(java, "broker-a", "127.0.0.1:10911", {"T": {"topicSysFlag": 2}},
                               ha="127.0.0.1:10912")
    assert head["code"] == ResponseCode.SUCCESS and body == b""  # a master: no masterAddr, no KV namespace yet
    assert "masterAddr" not in head.get("extFields", {})
    java_register(java, "broker-b", "127.0.0.1:10921", {"T": {"perm": 4, "readQueueNums": 8}})
    for client_peer in (java, RawPeer(srv, "GO", GO_VERSION)):
        head, body = client_peer.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert head["code"] == ResponseCode.SUCCESS
        # byte for byte: compact, quoted keys (client-go splits brokerAddrs on ',' and ':' by hand)
        assert body == (
            b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"},'
            b'{"brokerAddrs":{"0":"127.0.0.1:10921"},"brokerName":"broker-b","cluster":"DefaultCluster"}],'
            b'"filterServerTable":{},"queueDatas":['
            b'{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":2,"topicSysFlag":2,"writeQueueNums":4},'
            b'{"brokerName":"broker-b","perm":4,"readQueueNums":8,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}')
    head, body = java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Unknown"})
    assert head["code"] == ResponseCode.TOPIC_NOT_EXIST and body == b""
    assert "Unknown" in head["remark"]


def test_body_crc32_mismatch_is_refused_and_zero_is_unchecked(peer):
    _srv, java = peer
    body = register_body({"T": {}})
    head, _ = java.call(RequestCode.REGISTER_BROKER, register_ext("broker-a", "127.0.0.1:10911", body,
                                                                  crc=(zlib.crc32(body) & 0x7FFFFFFF) ^ 1), body)
    assert head["code"] == ResponseCode.SYSTEM_ERROR and head["remark"] == "crc32 not match"
    assert java.call(RequestCode.GET_BROKER_CLUSTER_INFO)[1] == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'
    head, _ = java.call(RequestCode.REGISTER_BROKER, register_ext("broker-a", "127.0.0.1:10911", body, crc=0), body)
    assert head["code"] == ResponseCode.SUCCESS  # 0 = not checked, as Java
    # a checksum with no body: Java's crc32(null) is 0, so any non-zero value mismatches
    head, _ = java.call(RequestCode.REGISTER_BROKER, register_ext("broker-a", "127.0.0.1:10911", b"", crc=7))
    assert head["code"] == ResponseCode.SYSTEM_ERROR


def test_fastjson_forms_and_compressed_body_are_accepted(peer):
    _srv, java = peer
    # fastjson PrettyFormat (tabs) and an unquoted map key elsewhere in the document
    pretty = (b'{\n\t"filterServerList":[],\n\t"topicConfigSerializeWrapper":{\n\t\t"dataVersion":{\n\t\t\t"counter":3,'
              b'\n\t\t\t"timestamp":1700000000000\n\t\t},\n\t\t"topicConfigTable":{\n\t\t\t"P":{\n\t\t\t\t"order":false,'
              b'\n\t\t\t\t"perm":6,\n\t\t\t\t"readQueueNums":2,\n\t\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t\t'
              b'"topicName":"P",\n\t\t\t\t"topicSysFlag":0,\n\t\t\t\t"writeQueueNums":2\n\t\t\t}\n\t\t}\n\t},'
              b'\n\t"extra":{0:"ignored"}\n}')
    head, _ = java.call(RequestCode.REGISTER_BROKER, register_ext("broker-a", "127.0.0.1:10911", pretty), pretty)
    assert head["code"] == ResponseCode.SUCCESS, head.get("remark")
    # RegisterBrokerBody.encode(compress=true): deflated length-prefixed DataVersion, "name r w perm type" lines
    version = b'{"counter":4,"timestamp":1700000000001}'
    packed = len(version).to_bytes(4, "big") + version + (2).to_bytes(4, "big")
    for line in (b"P 8 8 6 SINGLE_TAG", b"Q 1 1 4 MULTI_TAG"):
        packed += len(line).to_bytes(4, "big") + line
    packed += (2).to_bytes(4, "big") + b"[]"
    body = zlib.compress(packed, 9)
    head, _ = java.call(RequestCode.REGISTER_BROKER,
                        register_ext("broker-a", "127.0.0.1:10911", body, compressed=True), body)
    assert head["code"] == ResponseCode.SUCCESS, head.get("remark")
    queues = {t: json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t})[1])["queueDatas"][0]
              for t in ("P", "Q")}
    assert (queues["P"]["readQueueNums"], queues["P"]["writeQueueNums"], queues["Q"]["perm"]) == (8, 8, 4)


def test_data_version_gates_topic_updates(peer):
    _srv, java = peer
    java_register(java, "broker-a", "127.0.0.1:10911", {"T": {}}, counter=5)
    # same dataVersion: the name server does not re-read the topics (upstream isBrokerTopicConfigChanged)
    java_register(java, "broker-a", "127.0.0.1:10911", {"T": {"readQueueNums": 16}}, counter=5)
    route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})[1])
    assert route["queueDatas"][0]["readQueueNums"] == 4
    java_register(java, "broker-a", "127.0.0.1:10911", {"T": {"readQueueNums": 16}}, counter=6)
    route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})[1])
    assert route["queueDatas"][0]["readQueueNums"] == 16
    ext = {"brokerAddr": "127.0.0.1:10911", "brokerName": "broker-a", "clusterName": "DefaultCluster",
           "brokerId": 0}
    head, body = java.call(RequestCode.QUERY_DATA_VERSION, ext, b'{"counter":6,"timestamp":1700000000000}')
    assert head["extFields"]["changed"] == "false" and body == b'{"counter":6,"timestamp":1700000000000}'
    head, _ = java.call(RequestCode.QUERY_DATA_VERSION, ext, b'{"counter":7,"timestamp":1700000000000}')
    assert head["extFields"]["changed"] == "true"


def test_slave_registration_gets_master_and_ha_addr(peer):
    _srv, java = peer
    head, _ = java_register(java, "broker-a", "127.0.0.1:20911", broker_id=1, ha="127.0.0.1:20912")
    assert head["code"] == 0 and "masterAddr" not in head.get("extFields", {})  # no live master yet
    java_register(java, "broker-a", "127.0.0.1:10911", {"T": {}}, ha="127.0.0.1:10912")
    head, _ = java_register(java, "broker-a", "127.0.0.1:20911", {"SlaveOnly": {}}, broker_id=1,
                            ha="127.0.0.1:20912")
    assert head["extFields"] == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}
    _, body = java.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert body == (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:20911"},'
                    b'"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":'
                    b'["broker-a"]}}')
    assert java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "SlaveOnly"})[0]["code"] == 17  # master only
    head, _ = java.call(RequestCode.UNREGISTER_BROKER, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                                        "clusterName": "DefaultCluster", "brokerId": 0})
    assert head["code"] == 0
    head, _ = java_register(java, "broker-a", "127.0.0.1:20911", broker_id=1, ha="127.0.0.1:20912")
    assert "masterAddr" not in head.get("extFields", {})


def test_kv_config_round_trip_and_order_topic_conf(start_namesrv):
    srv = start_namesrv("--order-message-enable")
    java = RawPeer(srv)
    try:
        head, _ = java.call(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})
        assert head["code"] == ResponseCode.QUERY_NOT_FOUND and head["remark"] == "No config item, Namespace: NS Key: k"
        head, _ = java.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
        assert head["code"] == ResponseCode.QUERY_NOT_FOUND and head["remark"] == "No config item, Namespace: NS"
        assert java.call(RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"})[0]["code"] == 0
        head, _ = java.call(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})
        assert head["code"] == 0 and head["extFields"] == {"value": "v"}
        assert java.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})[1] == b'{"table":{"k":"v"}}'
        assert java.call(RequestCode.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k"})[0]["code"] == 0
        assert java.call(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})[0]["code"] == 22
        assert java.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})[1] == b'{"table":{}}'  # as Java

        java.call(RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"})
        head, body = java_register(java, "broker-a", "127.0.0.1:10911", {"T": {}})
        assert body == b'{"table":{"T":"broker-a:4"}}'  # the KVTable a Java broker reads (updateOrderTopicConfig)
        route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})[1])
        assert route["orderTopicConf"] == "broker-a:4"
    finally:
        java.close()


def test_topic_lists_perms_delete_and_unknown_codes(peer):
    _srv, java = peer
    java_register(java, "broker-a", "127.0.0.1:10911", {"T1": {"perm": 7}, "T2": {}, "U": {"topicSysFlag": 1},
                                                        "US": {"topicSysFlag": 2}})
    java_register(java, "broker-b", "127.0.0.1:10921", {"T2": {}, "B": {}}, cluster="Other")
    assert java.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)[1] == b'{"topicList":["B","T1","T2","U","US"]}'
    assert java.call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"})[1] == b'{"topicList":["B","T2"]}'
    head, body = java.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert json.loads(body) == {"brokerAddr": "127.0.0.1:10911",
                                "topicList": ["DefaultCluster", "broker-a", "Other", "broker-b"]}
    assert java.call(311)[1] == b'{"topicList":["U"]}'  # GET_UNIT_TOPIC_LIST
    assert java.call(312)[1] == b'{"topicList":["US"]}'  # GET_HAS_UNIT_SUB_TOPIC_LIST
    assert java.call(313)[1] == b'{"topicList":["US"]}'  # GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST

    head, _ = java.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert head["code"] == 0 and head["extFields"] == {"wipeTopicCount": "4"}
    perms = {t: json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t})[1])["queueDatas"][0]["perm"]
             for t in ("T1", "U")}
    assert perms == {"T1": 5, "U": 4}
    head, _ = java.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert head["extFields"] == {"addTopicCount": "4"}
    route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})[1])
    assert route["queueDatas"][0]["perm"] == 6  # upstream sets READ|WRITE, dropping INHERIT
    assert java.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "nobody"})[0]["extFields"] == {
        "wipeTopicCount": "0"}

    # DELETE_TOPIC_IN_NAMESRV with clusterName removes only that cluster's queue data
    assert java.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2", "clusterName": "Other"})[0]["code"] == 0
    route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T2"})[1])
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
    assert java.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2"})[0]["code"] == 0
    assert java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T2"})[0]["code"] == 17

    for code in (318, 319, RequestCode.SEND_MESSAGE):  # namesrv config and data-path codes are not served
        assert java.call(code, {})[0]["code"] == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_broker_controller_registers_as_a_java_broker(start_namesrv, tmp_path: Path):
    """The broker's own registration (controller.register_all / unregister_all) against the name server: the
    topic table arrives as a TopicConfigSerializeWrapper, a slave learns masterAddr / haServerAddr, and the
    ORDER_TOPIC_CONFIG KVTable is kept."""
    from broker_core.config import BrokerConfig
    from broker_core.server.controller import BrokerController
    from broker_core.server.state import TopicConfig

    srv = start_namesrv()
    java = RawPeer(srv)
    master = BrokerController(BrokerConfig(namesrv_addr=srv.addr).with_store_dir(tmp_path / "m"))
    slave = BrokerController(BrokerConfig(namesrv_addr=srv.addr, broker_id=1, broker_role="SLAVE")
                             .with_store_dir(tmp_path / "s"))
    try:
        master.port, slave.port = 10911, 20911
        master.topics.upsert(TopicConfig("Orders", 8, 4, 6, True))
        java.call(RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders",
                                              "value": "broker-a:4"})
        assert run_sync(master.register_all(), 30) and master.registered
        assert master.master_addr == "" and master.order_topic_config == {"Orders": "broker-a:4"}
        route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})[1])
        assert route["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "topicSynFlag": 0,
                                        "topicSysFlag": 0, "writeQueueNums": 4}]
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}

        assert run_sync(slave.register_all(), 30)
        assert (slave.master_addr, slave.master_ha_addr) == ("127.0.0.1:10911", "")  # master has no HA yet
        info = json.loads(java.call(RequestCode.GET_BROKER_CLUSTER_INFO)[1])
        assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911",
                                                                      "1": "127.0.0.1:20911"}

        run_sync(master.unregister_all(), 30)
        assert run_sync(slave.register_all(), 30)
        assert slave.master_addr == ""  # as upstream: the answer without masterAddr clears it
        route = json.loads(java.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})[1])
        assert route["brokerDatas"][0]["brokerAddrs"] == {"1": "127.0.0.1:20911"}  # the slave keeps the name alive
    finally:
        java.close()
        for ctl in (master, slave):
            run_sync(ctl.namesrv_client.close(), 30)
            ctl.store.shutdown()
