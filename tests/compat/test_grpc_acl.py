"""RocketMQ ACL 1.0 on the gRPC endpoint (``broker_core/grpc/auth.py``): the official Python client
(``rocketmq-python-client`` 5.1.2, its own process) with session credentials against a broker with
``aclEnable=true``, and raw stubs for the exact answers. A refusal is gRPC ``PERMISSION_DENIED``, as Apache's proxy
answers with ACL 1.0; the rules are the remoting side's (the same ``plain_acl.yml``, reloaded by admin code 53)."""

from __future__ import annotations

import hmac
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker_core.client import AdminClient, SessionCredentials
from broker_core.grpc.stubs import pb, service_pb2_grpc, svc
from broker_core.protocol import RequestCode
from tests.compat.grpc_cluster import DRIVER, GRPC_CONF
from tests.integration.acl_cluster import AclCluster, call

pytestmark = pytest.mark.integration

ACL = """
accounts:
  - accessKey: grpc-app1
    secretKey: grpc-app-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [GAcl=PUB|SUB, GAclPush=PUB|SUB, GAclReadOnly=SUB]
  - accessKey: grpc-admin
    secretKey: grpc-admin-secret
    admin: true
"""
APP = {"ak": "grpc-app1", "sk": "grpc-app-secret"}
ADMIN = SessionCredentials("grpc-admin", "grpc-admin-secret")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(tmp_path_factory.mktemp("grpc-acl"), ACL, GRPC_CONF)
    try:
        with AdminClient(c.namesrv, credentials=ADMIN) as admin:
            for topic in ("GAcl", "GAclPush", "GAclReadOnly", "GAclClosed"):
                admin.create_topic(topic, 2, 2)
        yield c
    finally:
        c.close()


def ep(cluster: AclCluster) -> str:
    return f"127.0.0.1:{cluster.broker.grpc_port}"


def official(cluster: AclCluster, op: str, **cmd: Any) -> tuple[int, dict[str, Any] | None, str]:
    """The official client's driver: (exit code, its JSON answer or None, stderr and the client's log)."""
    home = Path(tempfile.mkdtemp(prefix="client-home-", dir=cluster.tmp))  # a log of this run alone
    env = {**os.environ, "HOME": str(home)}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, str(DRIVER), json.dumps({"op": op, "endpoint": ep(cluster), **cmd})],
                          capture_output=True, timeout=180, cwd=cluster.tmp, env=env)
    out = proc.stdout.decode().strip().splitlines()
    logs = "".join(p.read_text(errors="replace") for p in sorted(home.rglob("*.log")))
    return proc.returncode, json.loads(out[-1]) if proc.returncode == 0 and out else None, \
        proc.stderr.decode() + logs


def metadata(ak: str, sk: str, when: str = "20261128T120000Z", upper: bool = False) -> list[tuple[str, str]]:
    """What the official clients send (Python ``Signature.metadata``; Node signs in upper-case hex): hex
    HmacSHA1 of x-mq-date-time."""
    sig = hmac.new(sk.encode(), when.encode(), "sha1").hexdigest()
    sig = sig.upper() if upper else sig
    return [("x-mq-date-time", when), ("x-mq-client-id", "acl-test@1"), ("x-mq-language", "PYTHON"),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}")]


def send(cluster: AclCluster, topic: str, md: list[tuple[str, str]]) -> Any:
    with grpc.insecure_channel(ep(cluster)) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        msg = pb.Message(topic=pb.Resource(name=topic), body=b"x", system_properties=pb.SystemProperties(
            message_id="01000000000000000000000000000000AA", body_encoding=pb.IDENTITY, message_type=pb.NORMAL))
        return stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=md, timeout=10)


def refused(cluster: AclCluster, topic: str, md: list[tuple[str, str]]) -> str:
    with pytest.raises(grpc.RpcError) as err:
        send(cluster, topic, md)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, err.value
    return str(err.value.details())


def test_right_credentials_send_and_receive(cluster: AclCluster) -> None:
    code, sent, err = official(cluster, "produce", messages=[{"topic": "GAcl", "body": f"m{i}"} for i in range(3)],
                               **APP)
    assert code == 0, err[-3000:]
    assert sent is not None and len(sent["results"]) == 3
    code, got, err = official(cluster, "receive", group="gacl-readers", topic="GAcl", expect=3, within=60,
                              invisible=30, **APP)
    assert code == 0, err[-3000:]
    assert got is not None and sorted(m["body"] for m in got["messages"]) == ["m0", "m1", "m2"]


def test_push_consumer_with_credentials(cluster: AclCluster) -> None:
    """Telemetry with a subscription, QueryAssignment, a push consumer's Heartbeat, renewed receives, acks."""
    code, _, err = official(cluster, "produce", messages=[{"topic": "GAclPush", "body": f"p{i}"} for i in range(3)],
                            **APP)
    assert code == 0, err[-3000:]
    code, got, err = official(cluster, "push", group="gacl-push", topic="GAclPush", expect=3, within=120, **APP)
    assert code == 0, err[-3000:]
    assert got is not None and sorted(m["body"] for m in got["messages"]) == ["p0", "p1", "p2"]
    assert "PERMISSION_DENIED" not in err


def test_wrong_secret_and_unknown_account_are_refused_by_the_client_too(cluster: AclCluster) -> None:
    wrong_secret = {"ak": "grpc-app1", "sk": "not-the-secret"}
    unknown = {"ak": "nobody-here", "sk": "whatever-secret"}
    for creds, reason in ((wrong_secret, "Check signature failed for accessKey=grpc-app1"),
                          (unknown, "No acl config for nobody-here")):
        code, _, err = official(cluster, "produce", messages=[{"topic": "GAcl", "body": "no"}], **creds)
        assert code != 0
        assert f'details = "{reason}"' in err and "StatusCode.PERMISSION_DENIED" in err, err[-3000:]
    code, _, err = official(cluster, "produce", messages=[{"topic": "GAcl", "body": "no"}])  # no credentials
    assert code != 0 and 'details = "No acl config for "' in err, err[-3000:]


def test_account_without_pub_cannot_send(cluster: AclCluster) -> None:
    code, _, err = official(cluster, "produce", messages=[{"topic": "GAclReadOnly", "body": "no"}], **APP)
    assert code != 0
    assert 'details = "No permission for topic:GAclReadOnly"' in err, err[-3000:]
    assert refused(cluster, "GAclClosed", metadata(**APP)) == "No default permission for topic:GAclClosed"
    assert send(cluster, "GAcl", metadata(**APP)).status.code == pb.OK


def test_exact_answers_of_raw_requests(cluster: AclCluster) -> None:
    good = metadata(**APP)
    assert refused(cluster, "GAcl", metadata("grpc-app1", "wrong-secret")) == \
        "Check signature failed for accessKey=grpc-app1"
    assert refused(cluster, "GAcl", metadata("unknown-key", "whatever")) == "No acl config for unknown-key"
    assert refused(cluster, "GAcl", [kv for kv in good if kv[0] != "authorization"]) == "No accessKey is configured"
    bad_hex = [(k, v.replace("Signature=", "Signature=zz") if k == "authorization" else v) for k, v in good]
    assert refused(cluster, "GAcl", bad_hex).startswith("authorization signature is not hex")
    assert refused(cluster, "GAcl", [("authorization", "MQv2-HMAC-SHA1")]) == "authorization header is incorrect"
    assert send(cluster, "GAcl", metadata(**APP, upper=True)).status.code == pb.OK
    with grpc.insecure_channel(ep(cluster)) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        route = stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="GAclReadOnly")), metadata=good)
        assert route.status.code == pb.OK  # ANY: SUB is enough to read a route
        with pytest.raises(grpc.RpcError) as err:
            stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="GAclClosed")), metadata=good)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as err:  # a consumer heartbeat must name its group
            stub.Heartbeat(svc.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER), metadata=good)
        assert err.value.details() == "Consumer heartbeat doesn't have group"
        hb = stub.Heartbeat(svc.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER, group=pb.Resource(name="g1")),
                            metadata=good)
        assert hb.status.code == pb.OK
        receive = svc.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=1, message_queue=pb.MessageQueue(
            topic=pb.Resource(name="GAclClosed")))
        with pytest.raises(grpc.RpcError) as err:  # a server stream: refused before its first answer
            list(stub.ReceiveMessage(receive, metadata=good, timeout=10))
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.PERMISSION_DENIED,
                                                           "No default permission for topic:GAclClosed")
        ok = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="GAcl")]))
        closed = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="GAclClosed")]))
        stream = stub.Telemetry(iter([svc.TelemetryCommand(settings=ok), svc.TelemetryCommand(settings=closed)]),
                                metadata=good, timeout=10)
        answers = []
        with pytest.raises(grpc.RpcError) as err:  # each command of the stream is checked
            for answer in stream:
                answers.append(answer)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert err.value.details() == "No default permission for topic:GAclClosed"
        assert [a.status.code for a in answers] == [pb.OK]


def test_global_white_list_set_by_admin_code_53_applies_to_grpc(cluster: AclCluster) -> None:
    stranger = metadata("unknown-key", "whatever")
    assert refused(cluster, "GAcl", stranger) == "No acl config for unknown-key"
    resp = call(cluster.broker.addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "127.0.0.1"},
                credentials=ADMIN)
    assert resp.code == 0, resp.remark
    try:
        assert send(cluster, "GAcl", stranger).status.code == pb.OK
        assert send(cluster, "GAclClosed", [kv for kv in stranger if kv[0] != "authorization"]).status.code == pb.OK
    finally:
        resp = call(cluster.broker.addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": ""},
                    credentials=ADMIN)
        assert resp.code == 0, resp.remark
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # loaded at once by the admin code; no wait expected
        try:
            send(cluster, "GAcl", stranger)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.PERMISSION_DENIED
            break
    else:
        pytest.fail("the white list stayed after it was emptied")
