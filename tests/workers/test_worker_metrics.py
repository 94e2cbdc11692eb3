"""The Celery worker's /metrics (BROKER_CORE_WORKER_METRICS_PORT): a real ``celery worker`` subprocess runs a task
sent with ``.delay()``; its endpoint counts it by name and state and times it."""

from __future__ import annotations

import urllib.request

import pytest

from tests.integration.cluster import Cluster, free_port, wait_until
from tests.workers.conftest import celery_worker, manage, worker_env
from workers.celery import app
from workers.tasks.jobs import prune

pytestmark = pytest.mark.integration


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def test_worker_metrics_count_and_time_tasks(tmp_path, redis_url: str, cluster: Cluster) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    env = {**worker_env(redis_url, cluster.namesrv, tmp_path / "worker.sqlite3"),
           "BROKER_CORE_WORKER_METRICS_PORT": str(port)}
    manage(env, "migrate", "--noinput")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    with celery_worker(env, tmp_path / "worker.log", f"metrics-{tmp_path.name}@localhost", app):
        wait_until(lambda: "celery_tasks_running" in scrape(port), timeout=60, what="the worker's /metrics")
        prune.delay().get(timeout=60)
        wait_until(lambda: 'celery_tasks_total{state="succeeded",task="workers.prune"} 1.0' in scrape(port),
                   timeout=60, what="the task to be counted")
        text = scrape(port)
        assert 'celery_task_runtime_seconds_count{task="workers.prune"} 1.0' in text
        assert 'celery_tasks_running{task="workers.prune"} 0.0' in text
