"""The console's Spark jobs run in-process by the real service (:func:`workers.spark_jobs_service.run_job`) with the
suite's one local SparkSession, against the workers suite's two real brokers (``broker-a``, ``broker-r``):
snapshots through the SDK, search/trace per broker, progress and counts on the Job row, result files with the
broker and coordinates of each record (read back as the console's read tasks read them,
:mod:`workers.spark_results`), snapshots released, cancel, failures recorded.

``transactional_db``: the engine's progress thread writes the row through its own database connection.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from celery.signals import worker_ready

from broker_core.client import AdminClient, Message, Producer
from console.jobs import spark as console_jobs
from console.models import Job
from tests.integration.cluster import Cluster
from tests.workers.conftest import make_topic
from workers import spark_results
from workers.spark_jobs_service import SEARCH_KIND, TRACE_KIND, fail_orphaned, run_job
from workers.tasks import spark as spark_tasks

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("transactional_db")]


@pytest.fixture(autouse=True)
def _results_dir(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """Results in the test's temp dir; every job here on Spark, however small (test_spark_engine.py tests the
    adaptive choice)."""
    settings.SPARK_RESULTS_URI = str(tmp_path / "spark-results")
    settings.SPARK_LOCAL_THRESHOLD_BYTES = 0
    return Path(settings.SPARK_RESULTS_URI)


def _snapshots_left(cluster: Cluster) -> list[str]:
    return [p.name for b in cluster.brokers.values() for p in (b.store_dir / "snapshots").glob("*")]


def _job(kind: str, params: dict[str, Any]) -> Job:
    return Job.objects.create(kind=kind, target="test", params=params)


def test_search_job_over_every_broker(spark: Any, cluster: Cluster, sdk_admin: AdminClient,
                                      producer: Producer, unique: Callable[[str], str], settings) -> None:  # type: ignore[no-untyped-def]
    topics = {b: make_topic(sdk_admin, unique(f"Search-{b}"), b, queues=2) for b in ("broker-a", "broker-r")}
    begin_ms = int(time.time() * 1000) - 1000
    needle = unique("order")
    planted: dict[str, set[str]] = {b: set() for b in topics}
    for broker, topic in topics.items():
        for i in range(60):
            body = json.dumps({"order": {"id": f"{needle}-{i}" if i % 10 == 3 else f"o-{i}"}, "pad": "x" * 200})
            sent = producer.send(Message(topic, body.encode(), tags="t", keys=f"k{i}"))
            if i % 10 == 3:
                planted[broker].add(sent.offset_msg_id)
    job = _job(console_jobs.SEARCH_KIND, {"spec": console_jobs.check_search_spec(
        {"topics": list(topics.values()), "begin_ms": begin_ms, "body_contains": needle}), "brokers": []})

    assert run_job(job.pk, spark=spark, worker="spark@test") == {"job": job.pk, "status": "done"}
    job.refresh_from_db()
    r = job.result
    assert r["worker"] == "spark@test" and r["engine"] == "spark"
    assert job.status == Job.DONE and job.finished is not None
    assert r["scanned"] == 120 and r["matched"] == 12 and r["rows"] == 12 and r["truncated"] is False
    assert set(r["brokers"]) == {"broker-a", "broker-r"}
    assert r["brokers"]["broker-a"]["matched"] == 6 and r["brokers"]["broker-r"]["matched"] == 6
    p = r["progress"]
    assert p["fraction"] == 1.0 and p["phase"] == "done" and p["brokers_done"] == 2 and p["bytes_scanned"] > 0
    assert job.total >= 2 and job.progress == job.total and p["tasks_total"] == job.total
    rows = spark_results.search_page(job.pk, 0, 1000, with_body=True)["rows"]
    got = {b: {row["offset_msg_id"] for row in rows if row["broker"] == b} for b in topics}
    assert got == planted
    assert all(row["topic"] == topics[row["broker"]] and "queue_offset" in row and needle in row["body_text"]
               for row in rows)
    csv_lines = base64.b64decode(spark_results.export_chunk(job.pk, "csv", 0, 1 << 20)["data"]).decode().splitlines()
    assert csv_lines[0].startswith("broker,topic,") and len(csv_lines) == 13
    assert r["files"]["jsonl"] == str(Path(settings.SPARK_RESULTS_URI) / str(job.pk) / "results.jsonl")
    assert [row["offset_msg_id"] for row in spark_results.search_page(job.pk, 10, 5, with_body=False)["rows"]] == [
        row["offset_msg_id"] for row in rows[10:]]  # a later page; viewers' pages have no bodies
    assert all("body_text" not in row for row in spark_results.search_page(job.pk, 0, 5, with_body=False)["rows"])
    assert _snapshots_left(cluster) == []
    # a second delivery of the same task does nothing
    assert run_job(job.pk, spark=spark)["status"] == "skipped"


def test_search_limit_keeps_exact_counts(spark: Any, cluster: Cluster, sdk_admin: AdminClient,
                                         producer: Producer, unique: Callable[[str], str], _results_dir: Path) -> None:
    topic = make_topic(sdk_admin, unique("Limit"), "broker-a")
    for i in range(20):
        producer.send(Message(topic, b"same body", keys=f"k{i}"))
    job = _job(console_jobs.SEARCH_KIND, {"spec": console_jobs.check_search_spec(
        {"topics": [topic], "body_contains": "same", "limit": 5}), "brokers": ["broker-a"]})
    stale = _results_dir / str(job.pk) / "left-by-a-crashed-run"  # a job id reused after a crash mid-write
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    run_job(job.pk, spark=spark)
    assert not stale.exists() and len(spark_results.search_page(job.pk, 0, 100, with_body=True)["rows"]) == 5
    job.refresh_from_db()
    assert (job.status, job.result["matched"], job.result["rows"], job.result["truncated"]) == (
        Job.DONE, 20, 5, True)
    assert list(job.result["brokers"]) == ["broker-a"]


def test_trace_job_by_key_carries_the_broker(spark: Any, cluster: Cluster, sdk_admin: AdminClient,
                                             producer: Producer, unique: Callable[[str], str]) -> None:
    topic = make_topic(sdk_admin, unique("Trace"), "broker-r")
    key = unique("trace-key")
    sent = producer.send(Message(topic, b"traced", keys=key))
    job = _job(console_jobs.TRACE_KIND, {"msg_id": None, "key": key, "begin_ms": None, "end_ms": None,
                                         "brokers": []})
    assert run_job(job.pk, spark=spark)["status"] == "done"
    job.refresh_from_db()
    trace = spark_results.trace_document(job.pk)["trace"]
    types = [(s["type"], s["broker"]) for s in trace["timeline"]]
    assert ("produced", "broker-r") in types and ("stored", "broker-r") in types
    assert sent.msg_id in trace["ids"]
    assert [(r["broker"], r["offset_msg_id"]) for r in trace["records"]] == [("broker-r", sent.offset_msg_id)]
    assert job.result["steps"] == len(trace["timeline"]) and job.result["progress"]["fraction"] == 1.0
    assert _snapshots_left(cluster) == []


def test_cancel_while_running_and_while_pending(spark: Any, cluster: Cluster, sdk_admin: AdminClient,
                                                producer: Producer, unique: Callable[[str], str]) -> None:
    topic = make_topic(sdk_admin, unique("Cancel"), "broker-a")
    producer.send(Message(topic, b"x" * 100))
    job = _job(console_jobs.SEARCH_KIND, {"spec": {"body_contains": "never-there"}, "brokers": []})

    def cancel_once_running() -> None:  # what the console's cancel button does, as soon as the job runs
        from django.db import OperationalError, connection

        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                try:
                    if Job.objects.filter(pk=job.pk, status=Job.RUNNING).update(status=Job.CANCELLING):
                        return
                except OperationalError:  # SQLite's shared in-memory test database: a table locked for a moment
                    pass
                time.sleep(0.005)
        finally:
            connection.close()

    t = threading.Thread(target=cancel_once_running)
    t.start()
    assert run_job(job.pk, spark=spark)["status"] == "cancelled"
    t.join()
    job.refresh_from_db()
    assert job.status == Job.CANCELLED and job.finished is not None and "cancelled" in job.result["error"]
    assert _snapshots_left(cluster) == []
    # the session still works after a cancel
    pending = _job(console_jobs.SEARCH_KIND, {"spec": {"topics": [topic]}, "brokers": ["broker-a"]})
    console_jobs.cancel(None, pending)
    assert run_job(pending.pk, spark=spark)["status"] == "skipped"
    assert Job.objects.get(pk=pending.pk).status == Job.CANCELLED


def test_failures_are_recorded(spark: Any, cluster: Cluster) -> None:
    job = _job(console_jobs.SEARCH_KIND, {"spec": {}, "brokers": ["no-such-broker"]})
    assert run_job(job.pk, spark=spark)["status"] == "failed"
    job.refresh_from_db()
    assert job.status == Job.FAILED and "no-such-broker" in job.result["error"] and job.finished is not None


def test_cancel_stops_a_running_spark_job(spark: Any, cluster: Cluster, sdk_admin: AdminClient,
                                          producer: Producer, unique: Callable[[str], str]) -> None:
    """A regex with catastrophic backtracking keeps the Spark task busy for minutes; the cancel requested once the
    progress shows the scan running reaches Spark through the progress callback and the job ends cancelled."""
    topic = make_topic(sdk_admin, unique("Slow"), "broker-a")
    producer.send(Message(topic, b"a" * 34 + b"!"))
    job = _job(console_jobs.SEARCH_KIND, {"spec": console_jobs.check_search_spec(
        {"topics": [topic], "body_regex": "^(a+)+$"}), "brokers": ["broker-a"]})
    asked: list[float] = []

    def cancel_once_scanning() -> None:
        from django.db import OperationalError, connection

        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline and not asked:
                try:
                    row = Job.objects.filter(pk=job.pk).values("status", "result").first() or {}
                    if (row.get("result") or {}).get("progress", {}).get("phase") == "scan" and \
                            Job.objects.filter(pk=job.pk, status=Job.RUNNING).update(status=Job.CANCELLING):
                        asked.append(time.monotonic())
                except OperationalError:  # SQLite's shared in-memory test database: a table locked for a moment
                    pass
                time.sleep(0.05)
        finally:
            connection.close()

    t = threading.Thread(target=cancel_once_scanning)
    t.start()
    result = run_job(job.pk, spark=spark)
    ended = time.monotonic()
    t.join()
    assert asked, "the scan never showed progress"
    assert result["status"] == "cancelled"
    assert ended - asked[0] < 30
    job.refresh_from_db()
    assert job.status == Job.CANCELLED and job.result["progress"]["phase"] in ("scan", "done")
    assert _snapshots_left(cluster) == []


def test_a_restarted_worker_fails_the_jobs_its_previous_life_left_running() -> None:
    mine = [Job.objects.create(kind=kind, target="t", status=status, result={"worker": "spark@a", "progress": {}})
            for kind, status in ((SEARCH_KIND, Job.RUNNING), (TRACE_KIND, Job.CANCELLING))]
    others = [Job.objects.create(kind=SEARCH_KIND, target="t", status=Job.RUNNING, result={"worker": "spark@b"}),
              Job.objects.create(kind=SEARCH_KIND, target="t", status=Job.PENDING),
              Job.objects.create(kind=SEARCH_KIND, target="t", status=Job.DONE, result={"worker": "spark@a"}),
              Job.objects.create(kind="dlq.resend", target="t", status=Job.RUNNING, result={"worker": "spark@a"})]
    # what Celery sends when the worker is up (the sender is its consumer); the receiver connects on import
    assert spark_tasks.fail_orphaned_jobs is not None
    worker_ready.send(sender=type("Consumer", (), {"hostname": "spark@a"})())
    for job in mine:
        job.refresh_from_db()
        assert job.status == Job.FAILED and "spark@a stopped" in job.result["error"] and job.finished is not None
        assert job.result["progress"] == {}  # what the job had recorded is kept
    assert [Job.objects.get(pk=j.pk).status for j in others] == [j.status for j in others]
    assert fail_orphaned("spark@a") == []  # nothing left to fail
