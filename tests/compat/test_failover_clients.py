"""Apache clients keep sending and receiving across a SIGKILL of the master in controller mode (issue 34: "the
name server's routes change at once, so clients follow without restarts"): the RocketMQ C++ client (PyPI
``rocketmq`` 0.4.4), ali-ons (Node, 4.x remoting) and the official RocketMQ 5 Python client over gRPC. Each runs a
producer and a consumer in one process that is never restarted; the master is SIGKILLed while it sends; the test
waits for a send acknowledged after the kill and for every acknowledged key to be consumed. The time from the kill
to the first acknowledged send is printed (``-s``), not asserted."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.cpp_driver import CPP_DRIVER, CPP_PYTHON, require
from tests.compat.failover_clients import TOPIC, create_everywhere, run_across_kill
from tests.integration.failover_cluster import FailoverGroup

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent


@pytest.fixture
def group(tmp_path: Path) -> Iterator[FailoverGroup]:
    g = FailoverGroup(tmp_path, controllers=1, brokers=3, broker_extra="grpcListenPort=0\n")
    try:
        yield g.start()
    finally:
        g.close()


def test_cpp_client_follows_a_killed_master(group: FailoverGroup, tmp_path: Path) -> None:
    require(CPP_PYTHON)
    create_everywhere(group)
    cmd = {"op": "failover", "namesrv": group.namesrv, "group": "cpp-fo", "topic": TOPIC,
           "stop_file": str(tmp_path / "cpp.stop"), "interval": 0.02}
    outcome = run_across_kill(group, "cpp", [str(CPP_PYTHON), str(CPP_DRIVER), json.dumps(cmd)],
                              tmp_path, cwd=tmp_path)
    print("\n" + outcome.report())
    assert outcome.sent and set(outcome.sent) <= set(outcome.got)


def test_ali_ons_follows_a_killed_master(group: FailoverGroup, tmp_path: Path) -> None:
    node_dir = HERE / "node"
    if not (node_dir / "node_modules" / "ali-ons").is_dir() or shutil.which("node") is None:
        pytest.fail("ali-ons is not installed: run `make tests/compat/node/node_modules/.installed` (make test does)")
    create_everywhere(group)  # ali-ons does not fall back to TBW102: the topic must exist
    cmd = {"op": "failover", "namesrv": group.namesrv, "group": "node-fo", "topic": TOPIC,
           "stop_file": str(tmp_path / "node.stop"), "interval": 0.02}
    outcome = run_across_kill(group, "node", ["node", str(node_dir / "node_client.js"), json.dumps(cmd)], tmp_path,
                              cwd=node_dir)
    print("\n" + outcome.report())
    assert outcome.sent and set(outcome.sent) <= set(outcome.got)


def test_grpc_python_client_follows_a_killed_master(group: FailoverGroup, tmp_path: Path) -> None:
    """The client's access point lists every broker's gRPC endpoint (RocketMQ 5 clients take several addresses,
    as for a proxy cluster): QueryRoute gives the group's queues that access point, the client's channel moves to
    a live broker when the master dies, and a slave forwards the sends to the new master (the proxy's cluster
    mode); receives follow the assignment, answered from the name server's route (the new master)."""
    create_everywhere(group, subscription_group="grpc-fo")
    endpoints = ";".join(f"127.0.0.1:{b.grpc_port}" for b in group.members)
    cmd = {"op": "failover", "endpoint": endpoints, "group": "grpc-fo", "topic": TOPIC,
           "stop_file": str(tmp_path / "grpc.stop"), "interval": 0.02}
    home = tmp_path / "client-home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop("PYTHONPATH", None)  # the driver imports only the official client
    outcome = run_across_kill(group, "grpc", [sys.executable, str(HERE / "grpc_client.py"), json.dumps(cmd)],
                              tmp_path, env=env, cwd=tmp_path)
    print("\n" + outcome.report())
    assert outcome.sent and set(outcome.sent) <= set(outcome.got)
