"""The search and trace jobs on a real Spark standalone cluster whose executors cannot see the brokers' stores.

A master and two workers are separate processes started from pyspark's own jars (``spark-class
org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker``). The workers (and so their executors) run
in a mount namespace where an empty tmpfs covers each broker's store directory: a snapshot's files do not exist
for them, so every byte they scan comes over the network (READ_SNAPSHOT_SEGMENT). The jobs are submitted as a
user would (``spark-submit --master spark://...`` of ``spark_jobs/jobs/search.py`` and ``trace.py``; the code is
shipped to the executors as a zip) over the snapshots of two brokers, and their results must equal the local-mode
run's over the same snapshots, read from the files.

Needs root (for the mount namespace), ``unshare`` and Java; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, Producer
from spark_jobs.jobs.search import run_search
from spark_jobs.jobs.trace import run_trace
from spark_jobs.segments import segments_of
from spark_jobs.transforms.filters import SearchSpec
from tests.conftest import ROOT
from tests.integration.cluster import Cluster, free_port, wait_until

pytestmark = pytest.mark.integration

SEGMENTS = "mapedFileSizeCommitLog=65536\n"  # 64 KiB segments: several per broker
BROKERS = ("broker-x", "broker-y")


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the executors' mount namespace (hiding the stores) needs root"
    if not shutil.which("unshare") or not shutil.which("java"):
        return "needs unshare (util-linux) and java"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"cannot make a mount namespace here: {probe.stderr.decode().strip()}"
    return None


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        c.add_brokers_registered({name: SEGMENTS for name in BROKERS})
        yield c
    finally:
        c.close()


class StandaloneCluster:
    """A Spark master and two workers (1 core, 1 GiB each) whose processes cannot see ``hidden`` dirs."""

    def __init__(self, tmp: Path, hidden: list[Path]) -> None:
        self.tmp, self.procs = tmp, []
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            self._start_all(hidden)
        except BaseException:
            print(self.logs())
            self.close()
            raise

    def _start_all(self, hidden: list[Path]) -> None:
        tmp = self.tmp
        self.port, web = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {**os.environ, "SPARK_HOME": str(_spark_home()), "SPARK_DAEMON_MEMORY": "256m",
                    "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                    "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work")}
        spark_class = str(_spark_home() / "bin" / "spark-class")
        self._start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                     str(self.port), "--webui-port", str(web)], "master")
        self.status_url = f"http://127.0.0.1:{web}/json/"
        wait_until(lambda: self._status() is not None, timeout=120, what="the Spark master's web UI")
        # each hidden store dir: an empty tmpfs over it, checked (the worker does not start if still visible)
        hide = " && ".join(f"mount -t tmpfs none '{d}' && test -z \"$(ls -A '{d}')\"" for d in hidden)
        for i in range(2):
            work = tmp / f"worker-{i}"
            work.mkdir()
            worker = (f"exec '{spark_class}' org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 1 "
                      f"--memory 1g --webui-port 0 --work-dir '{work}' {self.url}")
            self._start(["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{hide} && {worker}"],
                        f"worker-{i}")
        wait_until(lambda: len([w for w in (self._status() or {}).get("workers", []) if w.get("state") == "ALIVE"])
                   == 2 or any(p.poll() is not None for p in self.procs), timeout=120,
                   what="two Spark workers to register")
        assert all(p.poll() is None for p in self.procs), self.logs()

    def _start(self, cmd: list[str], name: str) -> None:
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def _status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(self.status_url, timeout=2) as resp:
                return dict(json.loads(resp.read()))
        except OSError:
            return None

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log")))

    def submit(self, script: str, *args: str) -> dict[str, Any]:
        """``spark-submit`` of a job script to the cluster (the driver here, the executors on the workers)."""
        env = {**self.env, "PYTHONPATH": str(ROOT), "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_CONF_UI": "spark.ui.enabled=false", "SPARK_CONF_EXEC": "spark.executor.memory=512m",
               "SPARK_CONF_CORES": "spark.cores.max=2"}
        out = subprocess.run([str(_spark_home() / "bin" / "spark-submit"), "--master", self.url,
                              "--driver-memory", "512m", str(ROOT / "spark_jobs" / "jobs" / script), *args],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))

    def close(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_search_and_trace_on_a_standalone_cluster_equal_local_mode(spark: Any, brokers: Cluster,
                                                                   tmp_path: Path) -> None:
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    with AdminClient(brokers.namesrv) as admin, Producer("standalone-pg", brokers.namesrv) as producer:
        topics = {}
        for name in BROKERS:
            topics[name] = f"Standalone-{name}"
            admin.create_topic(topics[name], 2, 2, brokers=[name])
        wait_until(lambda: set(topics.values()) <= set(admin.topic_list()), timeout=30, what="the routes")
        traced = None
        for name, topic in topics.items():
            for i in range(300):  # ~330 KiB per broker: 5-6 segments of 64 KiB
                body = (f"needle-{name}-{i}" if i % 25 == 7 else f"plain-{i}") + "." * 1000
                sent = producer.send(Message(topic, body.encode(), keys="the-traced-key" if (
                    name == "broker-y" and i == 150) else f"k{i}"))
                if name == "broker-y" and i == 150:
                    traced = sent
        assert traced is not None
        manifests = []
        for name in BROKERS:
            addr = brokers.brokers[name].addr
            manifest = admin.snapshot_segments(addr)
            assert len(manifest["segments"]) >= 4
            manifests.append({**manifest, "brokerAddr": addr})
        try:
            # local mode over the same snapshots, from the files (this process sees them)
            spec = SearchSpec(body_contains="needle-")
            local = run_search(spark, segments_of(manifests), spec, split_bytes=1 << 20)
            local_trace = run_trace(spark, segments_of(manifests), key="the-traced-key")
            files = []
            for i, m in enumerate(manifests):
                files.append(tmp_path / f"manifest-{i}.json")
                files[-1].write_text(json.dumps(m))
            snapshot_args = [a for f in files for a in ("--snapshot", str(f))]
            hidden = [brokers.brokers[name].store_dir for name in BROKERS]
            cluster = StandaloneCluster(tmp_path / "spark", hidden)
            try:
                searched = cluster.submit("search.py", *snapshot_args, "--body-contains", "needle-",
                                          "--split-mib", "1", "--out", str(tmp_path / "search"))
                cluster.submit("trace.py", *snapshot_args, "--key", "the-traced-key",
                               "--out", str(tmp_path / "trace"))
                # both applications ran executors on both workers (their work dirs: app-*/<executor id>/)
                status = cluster._status() or {}
                apps = [a["id"] for a in status.get("completedapps", []) + status.get("activeapps", [])]
                assert len(apps) == 2, json.dumps({k: v for k, v in status.items() if k != "workers"})
                for i in range(2):
                    assert sorted(d.name for d in (tmp_path / "spark" / f"worker-{i}").glob("app-*")) == sorted(apps)
            except AssertionError:
                print(cluster.logs())
                raise
            finally:
                cluster.close()
        finally:
            for name, m in zip(BROKERS, manifests, strict=True):
                admin.release_snapshot(brokers.brokers[name].addr, m["snapshotId"])
    rows = [json.loads(line) for line in (tmp_path / "search" / "results.jsonl").read_text().splitlines()]
    assert searched["matched"] == local.matched == 2 * 12 == len(rows)
    assert searched["scanned"] == local.scanned and searched["bytes_scanned"] == local.bytes_scanned
    assert [(r["segment"], r["pos"], r["offset_msg_id"]) for r in rows] == [
        (r["segment"], r["pos"], r["offset_msg_id"]) for r in local.rows]
    trace = json.loads((tmp_path / "trace" / "trace.json").read_text())
    assert traced.msg_id in trace["ids"] and trace["ids"] == local_trace.ids
    assert trace["timeline"] == json.loads(json.dumps(local_trace.timeline, default=str))
    assert {s["type"] for s in trace["timeline"]} >= {"produced", "stored"}
