"""The Celery worker's Prometheus metrics, served when ``BROKER_CORE_WORKER_METRICS_PORT`` is set (``0``: a free
port, logged; the host is ``BROKER_CORE_WORKER_METRICS_HOST``, 127.0.0.1 by default): tasks finished by name and
state, their run time, and tasks running now. The worker runs ``--pool=solo`` (Procfile), so the tasks run in the
process that serves the endpoint; with a prefork pool each child would count apart."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery.signals import task_failure, task_postrun, task_prerun, task_retry, worker_ready, worker_shutdown
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)
ENV_PORT = "BROKER_CORE_WORKER_METRICS_PORT"
ENV_HOST = "BROKER_CORE_WORKER_METRICS_HOST"

REGISTRY = CollectorRegistry(auto_describe=True)
TASKS = Counter("celery_tasks", "Tasks finished, by task name and state (succeeded, failed, retried)",
                ["task", "state"], registry=REGISTRY)
RUNTIME = Histogram("celery_task_runtime_seconds", "Time a task ran", ["task"], registry=REGISTRY,
                    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800))
RUNNING = Gauge("celery_tasks_running", "Tasks running now", ["task"], registry=REGISTRY)
_started: dict[str, float] = {}
_server: list[Any] = []


@worker_ready.connect
def _serve(**_kwargs: Any) -> None:
    port = os.environ.get(ENV_PORT, "").strip()
    if not port:
        return
    server, _thread = start_http_server(int(port), addr=os.environ.get(ENV_HOST, "127.0.0.1"), registry=REGISTRY)
    _server.append(server)
    log.info("worker metrics on http://%s:%d/metrics", *server.server_address[:2])


@worker_shutdown.connect
def _stop(**_kwargs: Any) -> None:
    while _server:
        _server.pop().shutdown()


@task_prerun.connect
def _prerun(task_id: str | None = None, task: Any = None, **_kwargs: Any) -> None:
    if task_id is not None:
        _started[task_id] = time.monotonic()
    RUNNING.labels(getattr(task, "name", "unknown")).inc()


@task_postrun.connect
def _postrun(task_id: str | None = None, task: Any = None, state: str | None = None, **_kwargs: Any) -> None:
    name = getattr(task, "name", "unknown")
    RUNNING.labels(name).dec()
    began = _started.pop(task_id, None) if task_id is not None else None
    if began is not None:
        RUNTIME.labels(name).observe(time.monotonic() - began)
    if state == "SUCCESS":
        TASKS.labels(name, "succeeded").inc()


@task_failure.connect
def _failed(sender: Any = None, **_kwargs: Any) -> None:
    TASKS.labels(getattr(sender, "name", "unknown"), "failed").inc()


@task_retry.connect
def _retried(sender: Any = None, **_kwargs: Any) -> None:
    TASKS.labels(getattr(sender, "name", "unknown"), "retried").inc()
