"""The RocketMQ 5 Node.js client's own integration tests against our broker's gRPC endpoint.

Apache's suite (apache/rocketmq-clients ``nodejs/test``) is only on GitHub: the npm package
``rocketmq-client-nodejs`` 1.0.8 ships no tests and CI cannot reach GitHub. ``node5/upstream/`` mirrors, case by
case under the same names and with the same checks, every upstream test that talks to a server
(``index.test.ts``, ``producer/Producer.test.ts``, ``consumer/SimpleConsumer.test.ts``), run with ``node --test``
against the npm package. Like upstream, the endpoint comes from ``ROCKETMQ_NODEJS_CLIENT_ENDPOINTS`` and the
topics are those ``helper.ts`` names (``mqadmin updatetopic`` in upstream's ``start-rocketmq.sh``: 8 queues)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from broker_core.client import AdminClient, SessionCredentials
from tests.compat.grpc_cluster import GRPC_CONF, endpoint
from tests.integration.acl_cluster import AclCluster
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

NODE5_DIR = Path(__file__).with_name("node5")
TOPICS = ("TopicTestForNormal", "TopicTestForFifo", "TopicTestForDelay", "TopicTestForTransaction")
# every `it` of the mirrored upstream files, by file
EXPECTED = {
    "index.test.js": ["should export work"],
    "producer/Producer.test.js": [
        "should startup success", "should startup fail when topic not exists", "should send normal message",
        "should send delay message", "should send fifo message", "should send transaction message"],
    "consumer/SimpleConsumer.test.js": [
        "should work", "should fail when accessKey invalid", "should fail when accessSecret invalid",
        "should receive success"],
}
TAP_LINE = re.compile(r"^\s*(ok|not ok) \d+ - (.*?)(?: # .*)?$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not (NODE5_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir() or shutil.which("node") is None:
        pytest.fail("rocketmq-client-nodejs is not installed: run "
                    "`make tests/compat/node5/node_modules/.installed` (make test does)")
    c = Cluster(tmp_path_factory.mktemp("node5-suite"))
    try:
        c.add_brokers_registered({"broker-a": GRPC_CONF})
        yield c
    finally:
        c.close()


def run_suite(cluster: Cluster | AclCluster, test_file: str, endpoints: str | None = None,
              **env: str) -> tuple[dict[str, str], str]:
    """``node --test`` on one mirrored file: ({test name: "ok" | "not ok"}, the TAP output)."""
    home = cluster.tmp / "node5-home"  # the client's logger writes under $HOME/logs
    home.mkdir(exist_ok=True)
    assert endpoints is not None or isinstance(cluster, Cluster)
    proc = subprocess.run(
        ["node", "--test", "--test-reporter=tap", str(NODE5_DIR / "upstream" / test_file)],
        capture_output=True, timeout=600, cwd=NODE5_DIR,
        env={**os.environ, "HOME": str(home),
             "ROCKETMQ_NODEJS_CLIENT_ENDPOINTS": endpoints or endpoint(cast(Cluster, cluster)), **env})
    out = proc.stdout.decode()
    (cluster.tmp / f"node5-{test_file.replace('/', '-')}.tap").write_text(out + proc.stderr.decode())
    results = {}
    for line in out.splitlines():
        m = TAP_LINE.match(line)
        if m:
            results[m.group(2)] = m.group(1)
    # the failures' TAP blocks (the client's logger also prints to the output, once per line it writes after
    # its stream closed at a shutdown)
    failed = "\n".join(block for block in re.split(r"\n(?=\s*# Subtest: )", out) if "not ok" in block
                       and "failureType: 'testCodeFailure'" in block)
    return results, failed or out[-4000:] + proc.stderr.decode()[-2000:]


@pytest.mark.parametrize("test_file", sorted(EXPECTED))
def test_upstream_nodejs_suite(cluster: Cluster, admin: AdminClient, test_file: str) -> None:
    for topic in TOPICS:
        admin.create_topic(topic, 8, 8, brokers=["broker-a"])
    results, out = run_suite(cluster, test_file)
    for name in EXPECTED[test_file]:
        assert results.get(name) == "ok", f"{test_file}: {name!r} did not pass:\n{out}"
    assert "not ok" not in results.values(), out


# The credential tests with ROCKETMQ_NODEJS_CLIENT_KEY / _SECRET set (upstream returns early without them), against
# a broker with aclEnable=true whose plain_acl.yml has that account (PUB|SUB on every topic, SUB on every group).
NODE_ACL = """
accounts:
  - accessKey: nodejs-client
    secretKey: nodejs-client-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: node5-admin
    secretKey: node5-admin-secret
    admin: true
"""
# Upstream's two refusal tests expect texts no Apache server sends: ``ForbiddenException`` (Code.FORBIDDEN) with
# "Username is not matched" (not in apache/rocketmq at all) or "Check signature failed for accessKey" (ACL 1.0's
# AclException text, which Apache's proxy never puts in an answer: it ends the call with gRPC PERMISSION_DENIED and
# no description; ACL 2.0 answers Code.UNAUTHORIZED). And since 1.0.8 the client wraps a route failure at startup
# ("Failed to fetch topic routes after 3 attempts") without its cause. They fail on the text alone; that the
# startup was refused, and by which rule (the gRPC error in the client's log), is checked here instead.
TEXT_ONLY_FAILURES = {
    "should fail when accessKey invalid": "PERMISSION_DENIED: No acl config for wrong",
    "should fail when accessSecret invalid": "PERMISSION_DENIED: Check signature failed for accessKey=nodejs-client",
}
REFUSED_STARTUP = "error=Error: Failed to fetch topic routes after 3 attempts"


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(tmp_path_factory.mktemp("node5-acl"), NODE_ACL, GRPC_CONF)
    try:
        with AdminClient(c.namesrv, credentials=SessionCredentials("node5-admin", "node5-admin-secret")) as admin:
            for topic in TOPICS:
                admin.create_topic(topic, 8, 8)
        yield c
    finally:
        c.close()


def test_upstream_credential_tests_against_an_acl_broker(acl_cluster: AclCluster) -> None:
    test_file = "consumer/SimpleConsumer.test.js"
    results, out = run_suite(acl_cluster, test_file, f"127.0.0.1:{acl_cluster.broker.grpc_port}",
                             ROCKETMQ_NODEJS_CLIENT_KEY="nodejs-client",
                             ROCKETMQ_NODEJS_CLIENT_SECRET="nodejs-client-secret")
    tap = (acl_cluster.tmp / f"node5-{test_file.replace('/', '-')}.tap").read_text()
    log = "".join(p.read_text(errors="replace") for p in (acl_cluster.tmp / "node5-home").rglob("*.log"))
    for name in EXPECTED[test_file]:
        if name in TEXT_ONLY_FAILURES:
            assert results.get(name) == "not ok", f"{name!r} passed: does the broker send its text now?\n{out}"
            block = tap[tap.index(f"# Subtest: {name}"):][:3000]
            assert REFUSED_STARTUP in block.split("# Subtest:", 2)[1], f"{name!r} was not refused:\n{block}"
            assert TEXT_ONLY_FAILURES[name] in log, f"{name!r}: no {TEXT_ONLY_FAILURES[name]!r} in the log:\n" \
                + log[-4000:]
        else:
            assert results.get(name) == "ok", f"{test_file}: {name!r} did not pass with credentials:\n{out}"


def test_upstream_producer_tests_signed_against_an_acl_broker(acl_cluster: AclCluster) -> None:
    """The producer file with the credentials set: every send (normal, delay, FIFO, transaction) signed."""
    test_file = "producer/Producer.test.js"
    results, out = run_suite(acl_cluster, test_file, f"127.0.0.1:{acl_cluster.broker.grpc_port}",
                             ROCKETMQ_NODEJS_CLIENT_KEY="nodejs-client",
                             ROCKETMQ_NODEJS_CLIENT_SECRET="nodejs-client-secret")
    for name in EXPECTED[test_file]:
        assert results.get(name) == "ok", f"{test_file}: {name!r} did not pass with credentials:\n{out}"
    assert "not ok" not in results.values(), out
