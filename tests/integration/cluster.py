"""Real processes for integration tests: a name server and brokers on free ports, each a subprocess
whose fixture waits for its ``READY port=N`` line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def free_port() -> int:
    """A port nothing listens on (bound, then released): for "is down" tests and helper servers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``cond`` until it holds; fail naming ``what`` after ``timeout`` seconds (not a timing assertion:
    the timeout only bounds a hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stop_process(proc: subprocess.Popen, timeout: float = 60) -> None:  # type: ignore[type-arg]
    """SIGTERM a child that still runs and wait ``timeout`` seconds for it, then SIGKILL it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def http_up(url: str) -> bool:
    """Whether ``url`` answers a GET with a status below 500 (a server that is up, whatever the page)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status < 500
    except OSError:
        return False


def _start(args: list[str], log_path: Path) -> tuple[subprocess.Popen, int]:  # type: ignore[type-arg]
    proc, ports = start_ready(args, log_path)
    return proc, ports["port"]


def start_ready(args: list[str], log_path: Path) -> tuple[subprocess.Popen, dict[str, int]]:  # type: ignore[type-arg]
    """Start ``python <args>`` and wait for its ready line ``READY port=N [grpc_port=M]``: the ports by name."""
    log = open(log_path, "ab")  # the child keeps the descriptor; ours closes with the test process
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=log)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("READY port="):
        proc.kill()
        raise RuntimeError(f"{args} did not start: {line!r}; see {log_path}: {log_path.read_text()[-2000:]}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # drain
    return proc, {k: int(v) for k, v in (field.split("=", 1) for field in line.split()[1:])}


@dataclass
class BrokerProcess:
    name: str
    store_dir: Path
    namesrv: str
    log_path: Path
    extra_conf: str = ""
    proc: subprocess.Popen | None = None  # type: ignore[type-arg]
    port: int = 0
    grpc_port: int = 0  # with grpcListenPort in extra_conf: the ready line's grpc_port
    metrics_port: int = 0  # with metricsExporterType=PROM in extra_conf: the ready line's metrics_port

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> BrokerProcess:
        conf = self.store_dir.parent / f"{self.name}.conf"
        conf.write_text(f"brokerName={self.name}\nmapedFileSizeCommitLog=4194304\nmaxHashSlotNum=10000\n"
                        f"maxIndexNum=40000\nmapedFileSizeConsumeQueue=60000\nwarmMapedFileEnable=false\n"
                        f"registerNameServerPeriod=1000\n"
                        # any free HA port: a restart on the same listen port would otherwise need listen+1, which
                        # another process's ephemeral socket may hold
                        f"haListenPort=0\n"
                        + self.extra_conf)
        args = ["-m", "broker_core", "--store-dir", str(self.store_dir), "--listen", f"127.0.0.1:{port}",
                "--namesrv", self.namesrv, "--config", str(conf)]
        self.proc, ports = start_ready(args, self.log_path)
        self.port, self.grpc_port = ports["port"], ports.get("grpc_port", 0)
        self.metrics_port = ports.get("metrics_port", 0)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.namesrv_proc, port = _start(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0",
                                          "--scan-interval-ms", "500", "--broker-expire-ms", "5000"],
                                         tmp / "namesrv.log")
        self.namesrv = f"127.0.0.1:{port}"
        self.brokers: dict[str, BrokerProcess] = {}

    def add_broker(self, name: str, extra_conf: str = "") -> BrokerProcess:
        b = BrokerProcess(name, self.tmp / name / "store", self.namesrv, self.tmp / f"{name}.log", extra_conf)
        b.store_dir.mkdir(parents=True)
        self.brokers[name] = b.start()
        return b

    def add_brokers_registered(self, brokers: dict[str, str]) -> Cluster:
        """Start ``{name: extra broker.conf lines}`` and wait until the name server lists them all."""
        from broker_core.client import AdminClient

        for name, conf in brokers.items():
            self.add_broker(name, conf)
        with AdminClient(self.namesrv) as admin:
            wait_until(lambda: set(brokers) <= set(admin.cluster_info().get("brokerAddrTable", {})), timeout=30,
                       what=f"brokers {sorted(brokers)} to register")
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            try:
                b.stop()
            except subprocess.TimeoutExpired:
                b.kill()
        self.namesrv_proc.send_signal(signal.SIGTERM)
        self.namesrv_proc.wait(timeout=30)


def read_topic(namesrv: str, topic: str, group: str = "test-topic-reader") -> list[Any]:
    """Every message of ``topic`` on every queue, read by our SDK from each queue's min to max offset."""
    from broker_core.client import PullConsumer, PullStatus

    reader = PullConsumer(group, namesrv).start()
    found: list[Any] = []
    try:
        for mq in reader.fetch_queues(topic):
            offset, end = reader.min_offset(mq), reader.max_offset(mq)
            while offset < end:
                res = reader.pull(mq, offset, 32)
                if res.status != PullStatus.FOUND:
                    break
                found += res.messages
                offset = max(res.next_begin_offset, offset + 1)
    finally:
        reader.shutdown()
    return found
