"""Bad input against a live broker: fuzzed and malformed frames, oversized frames and messages, unknown
codes, bad names, silent connections. The broker answers or closes that one connection, and keeps
serving everyone else."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient, run_sync
from tests.conftest import ROOT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("bad-input") / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BROKER_CORE_SERVER_CHANNEL_MAX_IDLE_TIME_SECONDS": "1",
           "BROKER_CORE_SERVER_MAX_FRAME_BYTES": str(8 * 1024 * 1024), "BROKER_CORE_WARM_MAPED_FILE_ENABLE": "false",
           "BROKER_CORE_MAPED_FILE_SIZE_COMMIT_LOG": str(64 * 1024 * 1024),
           "BROKER_CORE_AUTO_CREATE_TOPIC_ENABLE": "false"}  # unknown topics answer TOPIC_NOT_EXIST
    proc = subprocess.Popen([sys.executable, "-m", "broker_core", "--store-dir", str(store), "--listen",
                             "127.0.0.1:0"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("READY port="), line
    addr = f"127.0.0.1:{line.strip().split('=')[1]}"
    client = RemotingClient()
    resp = run_sync(client.invoke(addr, RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "Fuzz", "readQueueNums": 1, "writeQueueNums": 1})))
    assert resp.code == ResponseCode.SUCCESS
    yield addr
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def call(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    return run_sync(RemotingClient().invoke(addr, cmd, 5.0))


def still_serving(addr: str) -> None:
    resp = call(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "Fuzz", "queueId": 0}, b"ok"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def raw_exchange(addr: str, data: bytes, timeout: float = 3.0) -> bytes:
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=300))
def test_fuzzed_bytes_never_break_the_broker(broker, data):
    raw_exchange(broker, data, timeout=0.2)
    still_serving(broker)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.integers(0, 65535), header=st.dictionaries(st.sampled_from(
    ["topic", "queueId", "queueOffset", "consumerGroup", "maxMsgNums", "offsetMsgId", "key", "properties"]),
    st.one_of(st.text(max_size=20), st.integers(), st.none(), st.booleans())), body=st.binary(max_size=200))
def test_fuzzed_well_framed_requests_get_an_answer(broker, code, header, body):
    resp = call(broker, RemotingCommand(code, 0, 0, header, body))
    assert resp.is_response
    still_serving(broker)


def test_oversized_frame_closes_only_that_connection(broker):
    head = struct.pack(">ii", 9 * 1024 * 1024, 0)
    assert raw_exchange(broker, head) == b""  # closed without a reply, as RocketMQ's decoder does
    still_serving(broker)


def test_truncated_and_bad_headers_close_only_that_connection(broker):
    for raw in (struct.pack(">ii", 4 + 3, 3) + b"{x}",  # JSON header that does not parse
                struct.pack(">ii", 4 + 10, (1 << 24) | 10) + b"\0" * 10,  # binary header shorter than its fields
                struct.pack(">ii", 4, 7 << 24)):  # unknown serialize type
        assert raw_exchange(broker, raw) == b""
    still_serving(broker)


def test_unknown_code_and_bad_requests(broker):
    resp = call(broker, RemotingCommand.request(4242))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and resp.remark == " request type 4242 not supported"
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "no good"}, b"x"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "may only contain" in resp.remark  # as TopicValidator
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"queueId": 0}, b"x"))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "topic" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "Missing", "queueId": 0}, b"x"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "Fuzz", "queueId": 9}, b"x"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "Fuzz", "queueId": 0,
                                                                          "consumerGroup": "g", "queueOffset": "x"}))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueOffset" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"b": "Fuzz", "e": 0, "m": True},
                                                b"\x00\x00\x00\x05garbage"))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "nothex"}))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "offset" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 1 << 40}))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "can not find message" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"not json"))
    assert resp.code == ResponseCode.SYSTEM_ERROR


def test_oversized_message_is_refused(broker):
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "Fuzz", "queueId": 0},
                                                b"x" * (4 * 1024 * 1024 + 1)))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in resp.remark
    resp = call(broker, RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "topic": "Fuzz", "queueId": 0, "properties": "p\x01" + "v" * 40000 + "\x02"}, b"x"))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "properties" in resp.remark


def test_silent_connection_is_closed(broker):
    host, port = broker.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"\x00\x00")  # half a frame, then nothing
        assert s.recv(100) == b""  # the broker closes it (idle timeout 1 s here)
    still_serving(broker)


def test_runtime_info_and_store_operations(broker):
    info = json.loads(call(broker, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
    assert all(isinstance(v, str) for v in info.values())  # a KVTable of strings
    assert info["brokerName"] == "broker-a" and int(info["commit_log_max_offset"]) > 0
    assert int(info["commitLogMaxOffset"]) == int(info["commit_log_max_offset"])
    report = json.loads(call(broker, RemotingCommand.request(RequestCode.CLEAN_EXPIRED_FILES)).body)
    assert report["deleted_commit_log_files"] == [] and "disk" in report
    disk = json.loads(call(broker, RemotingCommand.request(RequestCode.CHECK_DISK)).body)
    assert 0 <= disk["ratio"] <= 1
