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
    assert cluster_info(client, srv) == {"brokerAddrTable": {}, "clusterAddrTable": {}, "brokerLiveTable": {}}
    assert f"broker {addr} expired" in srv.log()


def test_unregister_topic_list_delete_and_errors(start_namesrv, client):
    srv = start_namesrv()  # default expiry (120 s): nothing expires during this test
    assert register(client, srv, "broker-a", "127.0.0.1:10911", {"t1": 4, "t2": 2}).code == ResponseCode.SUCCESS
    assert register(client, srv, "broker-b", "127.0.0.1:10921", {"t2": 8}).code == ResponseCode.SUCCESS
    resp = invoke(client, srv, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert json.loads(resp.body) == {"topicList": ["t1", "t2"]}
    info = cluster_info(client, srv)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
    assert set(info["brokerLiveTable"]) == {"127.0.0.1:10911", "127.0.0.1:10921"}
    assert all(isinstance(v["lastUpdateTimestamp"], int) for v in info["brokerLiveTable"].values())

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
