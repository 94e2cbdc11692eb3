"""The tasks through a real ``celery worker`` subprocess (solo pool) on a real redis-server, against real
brokers, recording runs in the worker's own SQLite file (created by ``manage.py migrate``), read back here
with sqlite3. Tasks are applied with ``.delay()``, never eagerly."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, MessageQueue, Producer, PullConsumer
from tests.integration.cluster import Cluster, wait_until
from tests.workers.conftest import celery_worker, make_topic, manage, wait_flushed, worker_env
from workers import tasks
from workers.celery import app
from workers.locks import job_lock

pytestmark = pytest.mark.integration
RESULT_TIMEOUT_S = 60  # bounds a hang only


@dataclass
class Worker:
    proc: subprocess.Popen  # type: ignore[type-arg]
    hostname: str
    db_path: Path
    log_path: Path

    def runs(self, job: str, broker: str) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db_path) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM monitoring_jobrun WHERE job = ? AND broker = ? ORDER BY id",
                              (job, broker)).fetchall()
        return [{**dict(r), "counts": json.loads(r["counts"])} for r in rows]

    def run(self, run_id: int) -> dict[str, Any]:
        with sqlite3.connect(self.db_path) as db:
            db.row_factory = sqlite3.Row
            row = db.execute("SELECT * FROM monitoring_jobrun WHERE id = ?", (run_id,)).fetchone()
        return {**dict(row), "counts": json.loads(row["counts"])}

    def alive(self) -> bool:
        return self.proc.poll() is None and bool(app.control.ping(destination=[self.hostname], timeout=2.0))


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, redis_url: str, cluster: Cluster) -> Iterator[Worker]:
    tmp = tmp_path_factory.mktemp("worker")
    env = worker_env(redis_url, cluster.namesrv, tmp / "worker.sqlite3")
    manage(env, "migrate", "--noinput")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)  # this process sends and reads results
    hostname = f"workers-test-{tmp.name}@localhost"
    log_path = tmp / "worker.log"
    with celery_worker(env, log_path, hostname, app) as proc:
        yield Worker(proc, hostname, tmp / "worker.sqlite3", log_path)


def result(async_result: Any) -> dict[str, Any]:
    return async_result.get(timeout=RESULT_TIMEOUT_S)


def test_the_deliver_task_delivers_a_due_delayed_message(worker: Worker, cluster: Cluster, sdk_admin: AdminClient,
                                                         producer: Producer, unique: Callable[[str], str]):
    topic = make_topic(sdk_admin, unique("Delayed"), "broker-a")
    addr = cluster.brokers["broker-a"].addr
    sent = producer.send(Message(topic, b"deliver me", delay_level=2))
    wait_until(lambda: sdk_admin.delay_backlog(addr).get("2", {}).get("overdueMs", 0) > 0, timeout=30,
               what="the delayed message to be due")
    mq = MessageQueue(topic, "broker-a", 0)
    reader = PullConsumer("workers-test-reader", cluster.namesrv).start()
    try:
        assert reader.max_offset(mq) == 0  # due but undelivered: broker-a runs no delay tick of its own

        out = result(tasks.deliver_delayed.delay(broker="broker-a"))

        assert out["outcome"] == "ok" and out["counts"]["delivered"] >= 1 and out["counts"]["per_level"]["2"] >= 1
        got = reader.pull(mq, 0).messages
    finally:
        reader.shutdown()
    assert [(m.msg_id, m.body) for m in got] == [(sent.msg_id, b"deliver me")]
    recorded = worker.run(out["run_id"])
    assert recorded["outcome"] == "ok" and recorded["counts"]["delivered"] == out["counts"]["delivered"]
    assert recorded["counts"]["oldest_overdue_ms"] > 0 and recorded["broker"] == "broker-a"


def test_retention_and_disk_check_runs_are_recorded_with_their_counts(worker: Worker, cluster: Cluster,
                                                                     sdk_admin: AdminClient, producer: Producer,
                                                                     unique: Callable[[str], str]):
    topic = make_topic(sdk_admin, unique("Old"), "broker-r")
    for _ in range(80):
        producer.send(Message(topic, bytes(range(256)) * 12))  # 3 KiB that zlib would shrink: under 4 KiB, raw
    store = cluster.brokers["broker-r"].store_dir / "commitlog"
    before = sorted(p.name for p in store.iterdir() if p.name.isdigit())
    wait_flushed(sdk_admin, cluster, "broker-r")

    out = result(tasks.retention.delay(broker="broker-r"))

    after = sorted(p.name for p in store.iterdir() if p.name.isdigit())
    run = worker.run(out["run_id"])
    assert run["job"] == "retention" and run["outcome"] == "ok" and run["error"] == ""
    gone = [name for name in before if name not in after]  # by name: the allocator may add the next segment
    assert run["counts"]["commit_log_files_deleted"] == len(gone) >= 1, (before, after, run["counts"])
    assert run["counts"]["bytes_freed"] >= 65536 * run["counts"]["commit_log_files_deleted"]
    assert run["counts"]["files_deleted"] >= run["counts"]["commit_log_files_deleted"]
    assert run["duration_ms"] >= 0

    disk = result(tasks.disk_check.delay(broker="broker-a"))
    run = worker.run(disk["run_id"])
    assert run["job"] == "disk_check" and 0 < run["counts"]["disk_ratio"] < 1
    assert run["counts"]["state"] in {"ok", "clean", "clean_forcibly", "full"}
    assert (run["outcome"] == "ok") == (run["counts"]["state"] != "full")


def test_a_run_while_another_holds_the_job_lock_is_skipped(worker: Worker):
    # the test holds the (disk_check, broker-a) lock as an overlapping run on another worker would
    with job_lock("disk_check", "broker-a") as held:
        assert held
        skipped = result(tasks.disk_check.delay(broker="broker-a"))
    assert skipped["outcome"] == "skipped" and "lock" in skipped["error"]
    assert worker.run(skipped["run_id"])["outcome"] == "skipped"
    assert result(tasks.disk_check.delay(broker="broker-a"))["outcome"] in {"ok", "failed"}  # released: it runs


def test_beat_without_a_broker_fans_out_to_every_registered_broker(worker: Worker):
    out = result(tasks.disk_check.delay())
    assert {"broker-a", "broker-r"} <= set(out["fanned_out"])
    wait_until(lambda: any(r["outcome"] != "skipped" for r in worker.runs("disk_check", "broker-r")), timeout=60,
               what="the fanned-out disk check of broker-r")


def test_a_broker_that_is_down_is_a_failed_run_retried_and_the_worker_lives(worker: Worker, cluster: Cluster):
    gone = cluster.add_broker("broker-gone")
    addr = gone.addr
    gone.kill()  # SIGKILL: nothing listens on its address any more

    pending = tasks.retention.delay(broker="broker-gone", addr=addr)

    wait_until(lambda: len(worker.runs("retention", "broker-gone")) >= 2, timeout=60,
               what="the first run and a retry to be recorded")
    runs = worker.runs("retention", "broker-gone")
    assert all(r["outcome"] == "failed" and "ConnectionError" in r["error"] and addr in r["error"] for r in runs)
    assert pending.state in {"RETRY", "PENDING", "STARTED"}  # retrying with back-off, not failed for good
    assert worker.alive()
    assert result(tasks.disk_check.delay(broker="broker-a"))["broker"] == "broker-a"  # still does its work
