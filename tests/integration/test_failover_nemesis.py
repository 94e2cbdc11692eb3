"""The failover nemesis on separate hosts (issue 34, must show): three network namespaces for the broker group,
three for the controllers, one for the name server and one for the clients, joined by veth pairs to a bridge in
a ninth, with 10.200.78.x addresses that exist only inside them. ``nemesis_driver`` runs in the clients'
namespace: SDK producers (round-robin and orderly) and the Apache C++ client send, a reader reads, and each
round injects one fault (SIGKILL / SIGSTOP of the master, the master cut from the controllers, from its slaves
or from both, SIGKILL of the controller leader). The checker must find nothing: every acknowledged message read
back, no queue position with two messages, one start offset per epoch on every broker, per-queue order kept.

Rounds: ``BROKER_CORE_NEMESIS_ROUNDS`` (default 6 so CI stays at a couple of minutes; the README reports 20).
Skipped, with the reason, where namespaces cannot be made (not root, no ``ip``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.netns_hosts import bridged_hosts

NET = "10.200.78"
HOSTS = {"ns": 1, "cl": 2, "b0": 10, "b1": 11, "b2": 12, "c0": 20, "c1": 21, "c2": 22}


@pytest.fixture
def hosts() -> Iterator[dict[str, str]]:
    with bridged_hosts("fo", NET, HOSTS) as names:
        yield names


def test_nemesis_rounds_lose_nothing_acknowledged(hosts: dict[str, str], tmp_path: Path) -> None:
    rounds = int(os.environ.get("BROKER_CORE_NEMESIS_ROUNDS", "6"))
    cfg = {"tmp": str(tmp_path), "rounds": rounds, "seed": int(os.environ.get("BROKER_CORE_NEMESIS_SEED", "1")),
           "namesrv": [hosts["ns"], f"{NET}.{HOSTS['ns']}"],
           "brokers": [[hosts[h], f"{NET}.{HOSTS[h]}"] for h in ("b0", "b1", "b2")],
           "controllers": [[hosts[h], f"{NET}.{HOSTS[h]}"] for h in ("c0", "c1", "c2")]}
    conf = tmp_path / "nemesis.json"
    conf.write_text(json.dumps(cfg))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["ip", "netns", "exec", hosts["cl"], sys.executable, "-m", "tests.integration.nemesis_driver",
                           str(conf)], cwd=ROOT, env=env, capture_output=True, timeout=300 + 60 * rounds, check=False)
    (tmp_path / "driver.log").write_bytes(done.stderr)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in result.items() if k != "epoch_caches"}, indent=1))
    assert "error" not in result, result
    assert result["violations"] == [], result["violations"]
    assert result["caught_up"], "a replica never reached the master's CommitLog end"
    assert result["all_rounds_ok"], [r for r in result["rounds"] if not r.get("ok")]
    assert len(result["rounds"]) == rounds and result["acked"] > 0
