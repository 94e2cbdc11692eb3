"""The official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) producing over our brokers' gRPC
endpoint, run in its own process (``grpc_client.py``): sync and async sends, FIFO message groups, timed
delivery, transactions (commit, rollback, and UNKNOWN resolved by the client's checker over Telemetry), and the
route of a two-broker cluster. What it sends is read back by our SDK, the 4.x C++ client and the broker's
admin queries (what the console and REST API show)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import grpc
import pytest

from broker_core.client import AdminClient
from broker_core.grpc.stubs import pb, service_pb2_grpc, svc
from tests.compat.grpc_cluster import create_group, endpoint, grpc_cluster, official
from tests.compat.test_cpp_client import sdk_pull_all
from tests.conftest import ROOT
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

CPP_PYTHON = ROOT / ".venv-rocketmq" / "bin" / "python"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = grpc_cluster(tmp_path_factory.mktemp("grpc-producer"))
    try:
        yield c
    finally:
        c.close()


def test_route_answers_every_broker_with_its_grpc_endpoint(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("GRoute", 2, 2)  # on both brokers
    admin.create_topic("GRouteA", 3, 3, brokers=["broker-a"])
    wait_until(lambda: len(admin.topic_route("GRoute")["brokerDatas"]) == 2, what="GRoute on both brokers")
    with grpc.insecure_channel(endpoint(cluster, "broker-b")) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        asked = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1",
                                                                   port=cluster.brokers["broker-b"].grpc_port)])
        resp = stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="GRoute"), endpoints=asked))
        assert resp.status.code == pb.OK
        by_broker: dict[str, set[int]] = {}
        for q in resp.message_queues:
            by_broker.setdefault(q.broker.name, set()).add(q.id)
            port = q.broker.endpoints.addresses[0].port
            assert port == cluster.brokers[q.broker.name].grpc_port  # each broker's own gRPC port
            assert q.permission == pb.READ_WRITE and pb.NORMAL in q.accept_message_types
        assert by_broker == {"broker-a": {0, 1}, "broker-b": {0, 1}}
        only_a = stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="GRouteA"), endpoints=asked))
        assert {(q.broker.name, q.id) for q in only_a.message_queues} == {("broker-a", i) for i in range(3)}
        missing = stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="GNoSuchTopic"), endpoints=asked))
        assert missing.status.code == pb.TOPIC_NOT_FOUND and not missing.message_queues
        bad = stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="bad topic!"), endpoints=asked))
        assert bad.status.code == pb.ILLEGAL_TOPIC
    # the producer spreads its sends over both brokers' endpoints
    sent = official(cluster, "produce", mode="sync", broker="broker-b",
                    messages=[{"topic": "GRoute", "body": f"r{i}"} for i in range(12)])["results"]
    assert len(sent) == 12
    wait_until(lambda: len(sdk_pull_all(cluster, "GRoute")) == 12, what="route messages")
    assert {m.store_host for m in sdk_pull_all(cluster, "GRoute")} == {cluster.brokers[b].addr
                                                                        for b in ("broker-a", "broker-b")}


def test_sync_and_async_sends_reach_our_sdk_the_cpp_client_and_admin_queries(cluster: Cluster,
                                                                             admin: AdminClient) -> None:
    admin.create_topic("GSend", 2, 2, brokers=["broker-a"])
    specs = [{"topic": "GSend", "body": f"sync-{i}", "tag": "TagA", "keys": [f"k{i}"], "props": {"color": "red"}}
             for i in range(5)]
    sync = official(cluster, "produce", mode="sync", messages=specs)["results"]
    asyn = official(cluster, "produce", mode="async", messages=[{"topic": "GSend", "body": f"async-{i}"}
                                                                 for i in range(5)])["results"]
    ids = [r["message_id"] for r in sync + asyn]
    assert len(set(ids)) == 10
    got = {m.msg_id: m for m in sdk_pull_all(cluster, "GSend")}
    assert set(got) == set(ids)  # the client's message id is the UNIQ_KEY every 4.x reader shows
    first = got[sync[0]["message_id"]]
    assert (first.body, first.tags, first.keys, first.properties["color"]) == (b"sync-0", "TagA", ["k0"], "red")
    found, _ = admin.query_message("GSend", "k3")  # the console's and REST API's lookup by key
    assert [m.body for m in found] == [b"sync-3"]
    assert admin.view_message(first.offset_msg_id).body == b"sync-0"
    if not CPP_PYTHON.exists():
        pytest.fail(f"{CPP_PYTHON} is missing: run `make .venv-rocketmq/.installed` (make test does)")
    cmd = {"op": "pull", "namesrv": cluster.namesrv, "group": "cpp-reader", "topic": "GSend", "expression": "*",
           "props": ["color"]}
    proc = subprocess.run([str(CPP_PYTHON), str(ROOT / "tests" / "compat" / "cpp_client.py")],
                          input=json.dumps(cmd).encode(), capture_output=True, timeout=120, cwd=cluster.tmp)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    pulled = json.loads(proc.stdout.decode().strip().splitlines()[-1])["messages"]
    assert sorted(m["id"] for m in pulled) == sorted(ids)


def test_fifo_keeps_each_message_group_in_order(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("GFifo", 4, 4, brokers=["broker-a"])
    create_group(cluster, "g-fifo", orderly=True)
    specs = [{"topic": "GFifo", "body": f"{g}-{i:02d}", "group": g} for i in range(12) for g in ("ga", "gb", "gc")]
    official(cluster, "produce", mode="sync", messages=specs)
    queues: dict[str, set[int]] = {}
    for m in sdk_pull_all(cluster, "GFifo"):
        queues.setdefault(m.body.decode().split("-")[0], set()).add(m.queue_id)
    assert all(len(q) == 1 for q in queues.values())  # one group, one queue
    got = official(cluster, "push", group="g-fifo", topic="GFifo", expect=36, fail_first=True)["messages"]
    for g in ("ga", "gb", "gc"):  # each message failed once, retried in place, and the group kept its order
        seq = [m["body"] for m in got if m["group"] == g]
        assert seq == [f"{g}-{i:02d}" for i in range(12)], seq


def test_delayed_message_is_never_delivered_early(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("GDelay", 2, 2, brokers=["broker-a"])
    create_group(cluster, "g-delay")
    deliver_at = int(time.time()) + 4
    sent = official(cluster, "produce", mode="sync", messages=[
        {"topic": "GDelay", "body": "later", "deliver_at": deliver_at},
        {"topic": "GDelay", "body": "now"}])["results"]
    assert sdk_pull_all(cluster, "GDelay")[0].body == b"now" and len(sdk_pull_all(cluster, "GDelay")) == 1
    got = official(cluster, "receive", group="g-delay", topic="GDelay", expect=2)["messages"]
    later = next(m for m in got if m["body"] == "later")
    assert later["id"] == sent[0]["message_id"]
    assert later["received_ms"] >= deliver_at * 1000
    stored = next(m for m in sdk_pull_all(cluster, "GDelay") if m.body == b"later")
    assert stored.store_timestamp >= deliver_at * 1000  # put to its topic only at its time


def test_transactions_commit_rollback_and_check_back(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("GTx", 2, 2, brokers=["broker-a"])
    create_group(cluster, "g-tx")
    res = official(cluster, "transaction", topic="GTx", check="commit", messages=[
        {"body": "committed", "action": "commit"}, {"body": "rolled-back", "action": "rollback"},
        {"body": "checked", "action": "unknown"}])
    unknown_id = res["results"][2]["message_id"]
    assert res["checked"] == [unknown_id]  # the broker asked the client's checker over Telemetry
    wait_until(lambda: len(sdk_pull_all(cluster, "GTx")) == 2, what="committed messages")
    assert sorted(m.body for m in sdk_pull_all(cluster, "GTx")) == [b"checked", b"committed"]
    got = official(cluster, "receive", group="g-tx", topic="GTx", expect=2)["messages"]
    assert sorted(m["body"] for m in got) == ["checked", "committed"]
