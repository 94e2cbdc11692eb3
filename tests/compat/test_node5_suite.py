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

import pytest

from broker_core.client import AdminClient
from tests.compat.grpc_cluster import GRPC_CONF, endpoint
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


def run_suite(cluster: Cluster, test_file: str, **env: str) -> tuple[dict[str, str], str]:
    """``node --test`` on one mirrored file: ({test name: "ok" | "not ok"}, the TAP output)."""
    home = cluster.tmp / "node5-home"  # the client's logger writes under $HOME/logs
    home.mkdir(exist_ok=True)
    proc = subprocess.run(
        ["node", "--test", "--test-reporter=tap", str(NODE5_DIR / "upstream" / test_file)],
        capture_output=True, timeout=600, cwd=NODE5_DIR,
        env={**os.environ, "HOME": str(home), "ROCKETMQ_NODEJS_CLIENT_ENDPOINTS": endpoint(cluster), **env})
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
