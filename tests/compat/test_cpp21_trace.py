"""A real Apache C++ 2.1 client (PyPI ``rocketmq-python-cvs`` 2.1.0.3) with message trace on, against a broker with
``traceTopicEnable=true``: its producer's Pub and its push consumer's SubBefore/SubAfter are decoded by our
``trace_data`` codec, and the trace job's client-record transform makes them timeline steps.

What the real client does (rocketmq-client-cpp 2.x, ``TraceConstant``/``TraceUtil``): it writes its records not into
RMQ_SYS_TRACE_TOPIC but into ``rmq_sys_TRACE_DATA_<regionId>``: the producer's region is the one the broker's send
answer names (``DefaultRegion``), a consumer's the message's ``MSG_REGION`` or ``DEFAULT_REGION``; the topics are
auto-created by the first send. Each trace message is keyed by the traced message's id and keys (so a key query
finds it, as the trace job does). Pub has 14 fields; SubAfter only 6 (no contextCode, time or group; a message
without keys gets ``dKey``), so the group comes from the SubBefore of the same requestId.

The binding's wrapper has no trace switch; the driver (cpp21_trace_client.py) turns trace on through the bundled
library's C API (``SetProducerMessageTrace`` / ``SetPushConsumerMessageTrace`` with ``OPEN``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient
from broker_core.codec.trace_data import decode_trace_data, is_trace_data
from spark_jobs.transforms.client_trace import client_events, pair_client_events
from tests.compat.cpp_driver import CPP21_PYTHON, clean_env, one_broker_cluster
from tests.integration.cluster import Cluster, read_topic, wait_until

pytestmark = pytest.mark.integration

DRIVER = Path(__file__).with_name("cpp21_trace_client.py")
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
PRODUCER_TOPIC = "rmq_sys_TRACE_DATA_DefaultRegion"  # TraceConstant::TRACE_TOPIC + the send answer's region
CONSUMER_TOPIC = "rmq_sys_TRACE_DATA_DEFAULT_REGION"  # ... + TraceConstant::DEFAULT_REDION (no MSG_REGION)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from one_broker_cluster(tmp_path_factory, "cpp21-trace", "traceTopicEnable=true\n", CPP21_PYTHON)


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as a:
        yield a


def client_records(admin: AdminClient, topic: str, msg_id: str) -> list[tuple[Any, dict[str, Any]]]:
    """(trace message, record) for every client trace record about ``msg_id`` in ``topic``, found by key."""
    if topic not in admin.topic_list():
        return []
    found, _ = admin.query_message(topic, msg_id, max_num=64)
    return [(m, r) for m in found if is_trace_data(m.body) for r in decode_trace_data(m.body) if r["msgId"] == msg_id]


def test_cpp21_client_trace_records_decode(cluster: Cluster, admin: AdminClient) -> None:
    wait_until(lambda: TRACE_TOPIC in admin.topic_list(), timeout=30, what="the trace topic's route")
    admin.create_topic("Cpp21Traced", 2, 2)
    cmd = {"namesrv": cluster.namesrv, "producer_group": "cpp21-traced-producers",
           "consumer_group": "cpp21-traced-consumers", "topic": "Cpp21Traced", "keys": "cpp-order-7",
           "tags": "TagC", "log_dir": str(cluster.tmp / "cpp21-trace-log")}
    proc = subprocess.Popen([str(CPP21_PYTHON), str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cluster.tmp, env=clean_env(cluster.tmp))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((json.dumps(cmd) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "no answer"
        out = json.loads(line)
        msg_id = out["msg_id"]
        assert msg_id in out["consumed"]
        wait_until(lambda: [r["type"] for _, r in client_records(admin, PRODUCER_TOPIC, msg_id)] == ["Pub"],
                   timeout=90, what="the C++ producer's Pub")
        wait_until(lambda: sorted(r["type"] for _, r in client_records(admin, CONSUMER_TOPIC, msg_id))
                   == ["SubAfter", "SubBefore"], timeout=90, what="the C++ consumer's SubBefore and SubAfter")
    finally:
        if proc.poll() is None:
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    found = client_records(admin, PRODUCER_TOPIC, msg_id) + client_records(admin, CONSUMER_TOPIC, msg_id)
    # not in RMQ_SYS_TRACE_TOPIC (that holds only the broker's own JSON events)
    assert not [m for m in read_topic(cluster.namesrv, TRACE_TOPIC, "cpp21-trace-reader") if is_trace_data(m.body)]
    by_type = {r["type"]: r for _, r in found}
    pub, before, after = by_type["Pub"], by_type["SubBefore"], by_type["SubAfter"]
    print("C++ 2.1 trace records:", json.dumps([r for _, r in found]))
    assert (pub["groupName"], pub["topic"], pub["keys"], pub["tags"], pub["success"]) == (
        "cpp21-traced-producers", "Cpp21Traced", "cpp-order-7", "TagC", True)
    assert pub["msgType"] == "Normal_Msg" and pub["regionId"] == "DefaultRegion"
    assert pub["costTime"] >= 0 and pub["timestamp"] > 0 and pub["bodyLength"] == len(b"traced by the C++ 2.1 client")
    assert pub["storeHost"] == cluster.brokers["broker-a"].addr and pub["offsetMsgId"]
    assert before["groupName"] == "cpp21-traced-consumers" and before["retryTimes"] == 0
    assert before["keys"] == "cpp-order-7" and before["timestamp"] >= pub["timestamp"]
    # the 2.1 SubAfter: requestId, msgId, costTime, success, keys and nothing more
    assert (after["requestId"], after["success"], after["keys"]) == (before["requestId"], True, "cpp-order-7")
    assert (after["contextCode"], after["groupName"], after["timestamp"]) == ("", "", 0)

    # the trace job's transform, on the same trace messages as rows (no Spark session)
    events = []
    for i, m in enumerate({m.msg_id: m for m, _ in found}.values()):
        row = {"body": m.body, "segment": 0, "pos": i, "phy_offset": i, "born_host": m.born_host}
        events += client_events(row, {msg_id})
    events = pair_client_events(events)
    kinds = {e["type"]: e for e in events}
    assert {"client-sent", "client-consume-start", "client-consumed"} <= set(kinds)
    assert kinds["client-sent"]["extra"]["producerGroup"] == "cpp21-traced-producers"
    assert kinds["client-consumed"]["group"] == "cpp21-traced-consumers"
    assert kinds["client-consumed"]["status"] == "SUCCESS"  # from success=true (no contextCode)
    assert kinds["client-consumed"]["timestamp"] == before["timestamp"] + after["costTime"]
    assert kinds["client-sent"]["costMs"] == pub["costTime"] and kinds["client-sent"]["status"] == "success"
