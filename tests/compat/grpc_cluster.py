"""A name server and two brokers serving RocketMQ 5 gRPC, and a runner for the official Python client's driver
(``grpc_client.py``, a separate process with a temporary HOME: the client writes its log under it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.remoting.blocking import BlockingClient
from tests.conftest import ROOT
from tests.integration.cluster import Cluster

DRIVER = Path(__file__).with_name("grpc_client.py")
# gRPC on any free port; transaction checks every second for half messages older than a second (tests only)
GRPC_CONF = ("grpcListenPort=0\nautoCreateTopicEnable=false\ntransactionTimeOut=1000\n"
             "transactionCheckInterval=1000\n")


def grpc_cluster(tmp: Path) -> Cluster:
    c = Cluster(tmp)
    c.add_brokers_registered({"broker-a": GRPC_CONF, "broker-b": GRPC_CONF})
    return c


def endpoint(cluster: Cluster, broker: str = "broker-a") -> str:
    return f"127.0.0.1:{cluster.brokers[broker].grpc_port}"


def official(cluster: Cluster, op: str, timeout: float = 180, broker: str = "broker-a", **cmd: Any) -> dict[str, Any]:
    """Run one command of the official client's driver against ``broker``'s gRPC endpoint; its JSON answer."""
    home = cluster.tmp / "client-home"
    home.mkdir(exist_ok=True)
    cmd = {"op": op, "endpoint": endpoint(cluster, broker), **cmd}
    env = {**os.environ, "HOME": str(home)}
    env.pop("PYTHONPATH", None)  # the driver imports only the official client
    proc = subprocess.run([sys.executable, str(DRIVER), json.dumps(cmd)], capture_output=True, timeout=timeout,
                          cwd=cluster.tmp, env=env)
    assert proc.returncode == 0, f"official client {op} failed: {proc.stderr.decode()[-3000:]}"
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def create_group(cluster: Cluster, group: str, *, retry_max_times: int = 16, orderly: bool = False) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on every broker (RocketMQ 5's ``consumeMessageOrderly`` for FIFO)."""
    body = json.dumps({"groupName": group, "consumeEnable": True, "retryMaxTimes": retry_max_times,
                       "consumeMessageOrderly": orderly}).encode()
    client = BlockingClient()
    try:
        for b in cluster.brokers.values():
            resp = client.invoke(b.addr, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body), 10.0)
            assert resp.code == 0, resp.remark
    finally:
        client.close()


__all__ = ["ROOT", "create_group", "endpoint", "grpc_cluster", "official"]
