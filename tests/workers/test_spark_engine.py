"""Adaptive execution: a job below ``SPARK_LOCAL_THRESHOLD_BYTES`` runs in the worker process without Spark, a
larger one on Spark, with the same results; the job row and the Spark pages say which engine ran.

The worker engine is checked by handing :func:`run_job` a "SparkSession" that fails on any use: the job can only
succeed if Spark was never touched. Real brokers (the workers suite's ``broker-a`` and ``broker-r``), the real
service, the suite's one local SparkSession for the Spark runs; the job pages read the results through a real
spark worker process (``celery worker -Q spark``) that shares the results directory with the runs here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from broker_core.client import AdminClient, Message, Producer
from console.jobs import spark as console_jobs
from console.models import Job
from tests.integration.cluster import Cluster
from tests.workers.conftest import make_topic, spark_results_worker
from workers import spark_results
from workers.celery import app
from workers.spark_jobs_service import run_job

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("transactional_db")]


class NoSpark:
    """Stands in for the SparkSession where the job must not use Spark: any attribute access fails the job."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"Spark was used ({name}) by a job that should run in the worker")


@pytest.fixture(scope="module")
def worker_results(tmp_path_factory: pytest.TempPathFactory, redis_url: str, cluster: Cluster) -> Iterator[str]:
    """The results directory of the module's spark worker, which answers the pages' reads."""
    tmp = tmp_path_factory.mktemp("engine-worker")
    with spark_results_worker(tmp, redis_url, cluster.namesrv, str(tmp / "results"), app):
        yield str(tmp / "results")


@pytest.fixture(autouse=True)
def _results_dir(settings, worker_results: str) -> None:  # type: ignore[no-untyped-def]
    settings.SPARK_RESULTS_URI = worker_results  # the runs here write where the worker reads


@pytest.fixture
def planted(sdk_admin: AdminClient, producer: Producer, unique: Callable[[str], str]) -> dict[str, Any]:
    """Two topics (one per broker), 40 messages each, every 8th carrying the needle."""
    topics = {b: make_topic(sdk_admin, unique(f"Engine-{b}"), b, queues=2) for b in ("broker-a", "broker-r")}
    begin_ms = int(time.time() * 1000) - 1000
    needle = unique("needle")
    key = unique("engine-key")
    ids: set[str] = set()
    for broker, topic in topics.items():
        for i in range(40):
            body = f"{needle}-{i}" if i % 8 == 5 else f"plain-{i}"
            sent = producer.send(Message(topic, body.encode(), tags="t", keys=key if i == 5 else f"k{i}"))
            if i % 8 == 5:
                ids.add(f"{broker}/{sent.offset_msg_id}")
    return {"topics": topics, "begin_ms": begin_ms, "needle": needle, "key": key, "ids": ids}


def _search(planted: dict[str, Any]) -> Job:
    spec = console_jobs.check_search_spec({"topics": list(planted["topics"].values()),
                                           "begin_ms": planted["begin_ms"], "body_contains": planted["needle"]})
    return Job.objects.create(kind=console_jobs.SEARCH_KIND, target="t", params={"spec": spec, "brokers": []})


def _rows(job: Job) -> set[str]:
    return {f"{r['broker']}/{r['offset_msg_id']}" for r in spark_results.search_page(job.pk, 0, 1000, True)["rows"]}


def _page(kind: str, job: Job) -> str:
    client = Client()
    client.force_login(User.objects.create_superuser(f"admin-{job.pk}", password="pw"))
    page = client.get(f"/{kind}/jobs/{job.pk}/")
    assert page.status_code == 200
    return page.content.decode()


def test_a_small_search_runs_in_the_worker_and_a_large_one_on_spark(
        spark: Any, planted: dict[str, Any], settings) -> None:  # type: ignore[no-untyped-def]
    small = _search(planted)
    assert settings.SPARK_LOCAL_THRESHOLD_BYTES == 64 * 1024 * 1024  # the default: these topics are far below
    assert run_job(small.pk, spark=NoSpark())["status"] == "done"
    small.refresh_from_db()
    assert small.result["engine"] == "worker" and 0 < small.result["bytes_in_range"] < 64 * 1024 * 1024
    assert small.result["matched"] == 10 and _rows(small) == planted["ids"]
    p = small.result["progress"]
    assert p["fraction"] == 1.0 and p["phase"] == "done" and p["brokers_done"] == 2 and p["bytes_scanned"] > 0
    html = _page("search", small)  # its rows come from the spark worker process
    assert 'data-engine="worker"' in html and all(f"/messages/{i.split('/')[1]}/" in html for i in planted["ids"])

    settings.SPARK_LOCAL_THRESHOLD_BYTES = 1  # every range is "large" now
    large = _search(planted)
    assert run_job(large.pk, spark=spark)["status"] == "done"
    large.refresh_from_db()
    assert large.result["engine"] == "spark"
    assert large.result["bytes_in_range"] >= small.result["bytes_in_range"]
    assert large.result["matched"] == 10 and _rows(large) == planted["ids"]
    assert 'data-engine="spark"' in _page("search", large)


def test_a_small_trace_runs_in_the_worker_with_the_timeline_spark_gives(
        spark: Any, planted: dict[str, Any], settings) -> None:  # type: ignore[no-untyped-def]
    params = {"msg_id": None, "key": planted["key"], "begin_ms": None, "end_ms": None, "brokers": []}
    timelines = {}
    for threshold, engine, session in ((64 * 1024 * 1024, "worker", NoSpark()), (0, "spark", spark)):
        settings.SPARK_LOCAL_THRESHOLD_BYTES = threshold
        job = Job.objects.create(kind=console_jobs.TRACE_KIND, target="t", params=params)
        assert run_job(job.pk, spark=session)["status"] == "done"
        job.refresh_from_db()
        assert job.result["engine"] == engine
        assert f'data-engine="{engine}"' in _page("trace", job)
        timelines[engine] = spark_results.trace_document(job.pk)["trace"]["timeline"]
    assert timelines["worker"] == timelines["spark"]
    assert {(s["type"], s["broker"]) for s in timelines["worker"]} >= {("stored", "broker-a"), ("stored", "broker-r")}
