"""The real RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4, driven by ``cpp_client.py`` in ``.venv-rocketmq``) with
session credentials against a broker with ``aclEnable=true``: it signs ``AccessKey``, ``OnsChannel`` and its
header fields (some as JSON numbers) in its own way, and our broker verifies them (reference §9.2)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, Producer, PullConsumer, PullStatus, SessionCredentials
from tests.compat.cpp_driver import CPP_PYTHON, cpp, require
from tests.integration.acl_cluster import AclCluster
from tests.integration.cluster import wait_until

pytestmark = pytest.mark.integration

ACL = """
accounts:
  - accessKey: cpp-client
    secretKey: cpp-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [CppAcl=PUB|SUB]
  - accessKey: sdk-admin
    secretKey: sdk-admin-secret
    admin: true
"""
CPP = {"access_key": "cpp-client", "secret_key": "cpp-secret-1", "channel": "ALIYUN"}
ADMIN = SessionCredentials("sdk-admin", "sdk-admin-secret")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    require(CPP_PYTHON)
    c = AclCluster(tmp_path_factory.mktemp("cpp-acl"), ACL)
    try:
        with AdminClient(c.namesrv, credentials=ADMIN) as admin:
            admin.create_topic("CppAcl", 2, 2)
            admin.create_topic("CppAclClosed", 2, 2)
        yield c
    finally:
        c.close()


def spec(topic: str, body: bytes) -> dict[str, Any]:
    return {"topic": topic, "body": base64.b64encode(body).decode(), "tags": "T", "keys": body.decode()}


def stored_bodies(cluster: AclCluster, topic: str) -> list[bytes]:
    consumer = PullConsumer("sdk-acl-reader", cluster.namesrv, credentials=ADMIN).start()
    try:
        out = []
        for mq in consumer.fetch_queues(topic):
            res = consumer.pull(mq, 0, 64)
            if res.status == PullStatus.FOUND:
                out += [m.body for m in res.messages]
        return sorted(out)
    finally:
        consumer.shutdown()


def refusals(cluster: AclCluster) -> str:
    return "\n".join(line for line in cluster.broker.log_path.read_text().splitlines() if "ACL refused" in line)


# The C++ client reports a send the broker refused, after its retries, as "No route info of this topic" and drops
# the remark, so what the broker refused and why is read from the broker's log, and the store is checked too.
def test_signed_produce_succeeds_and_other_topics_are_refused(cluster: AclCluster) -> None:
    results = cpp(cluster, "produce", group="cpp-acl-pg", mode="sync", credentials=CPP, capture_errors=True,
                  messages=[spec("CppAcl", b"signed-%d" % i) for i in range(3)] + [spec("CppAclClosed", b"no")])
    ok, refused = results["results"][:3], results["results"][3]
    assert [r.get("status") for r in ok] == ["OK"] * 3, ok
    assert "error" in refused, refused
    assert "ACL refused request code 10" in refusals(cluster)
    assert "No default permission for topic:CppAclClosed" in refusals(cluster)
    assert stored_bodies(cluster, "CppAcl") == [b"signed-0", b"signed-1", b"signed-2"]
    assert stored_bodies(cluster, "CppAclClosed") == []


def test_wrong_secret_and_no_credentials_are_refused(cluster: AclCluster) -> None:
    results = cpp(cluster, "produce", group="cpp-acl-pg", mode="sync", capture_errors=True,
                  credentials={**CPP, "secret_key": "not-the-secret"}, messages=[spec("CppAcl", b"forged")])
    assert "error" in results["results"][0], results
    assert "Check signature failed for accessKey=cpp-client" in refusals(cluster)
    unsigned = cpp(cluster, "produce", group="cpp-acl-pg", mode="sync", capture_errors=True,
                   messages=[spec("CppAcl", b"unsigned")])["results"]
    assert "error" in unsigned[0], unsigned
    assert "No accessKey is configured" in refusals(cluster)  # the C++ client sends AccessKey "" without a hook
    assert b"forged" not in stored_bodies(cluster, "CppAcl") and b"unsigned" not in stored_bodies(cluster, "CppAcl")


def test_signed_push_consume_receives_and_commits(cluster: AclCluster) -> None:
    with Producer("sdk-acl-pg", cluster.namesrv, credentials=ADMIN) as producer:
        for i in range(6):
            producer.send(Message("CppAcl", b"to-cpp-%d" % i))
    before = refusals(cluster)
    got = cpp(cluster, "push", group="cpp-acl-consumers", topic="CppAcl", expect=6, timeout=60, credentials=CPP)
    bodies = sorted(base64.b64decode(m["body"]) for m in got["messages"])
    assert [b for b in bodies if b.startswith(b"to-cpp-")] == sorted(b"to-cpp-%d" % i for i in range(6))
    assert refusals(cluster) == before  # its heartbeats, pulls and commits were all verified and allowed
    with AdminClient(cluster.namesrv, credentials=ADMIN) as admin:  # its signed offset commits were accepted
        wait_until(lambda: sum(r["consumerOffset"] for r in admin.consume_stats("cpp-acl-consumers", "CppAcl")
                               ["offsetTable"]) == sum(r["maxOffset"] for r in admin.consume_stats(
                                   "cpp-acl-consumers", "CppAcl")["offsetTable"]),
                   what="the C++ consumer's signed offset commits")
