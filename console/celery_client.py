"""The one console module that imports Celery: it publishes tasks by name and, for reads only a worker can make,
calls one and waits for its answer.

Why here and why this way: dependencies flow ``workers -> console``, never back, so the console may not import
:mod:`workers` (the task functions or the worker's app). It does not need them: Celery delivers a task by its
registered name, so a small producer-only :class:`celery.Celery` app, configured from the same ``CELERY_*``
settings as the worker's app (broker URL, result backend, serializer, routes), publishes ``send_task("workers.
<job>")`` and a worker runs it. The import-linter contract "the console reaches brokers only through the SDK"
forbids ``celery`` in the console except for exactly this module (its ``ignore_imports``).

- :func:`send` does not wait: it returns the task id ("run now", queuing a Spark job).
- :func:`call` waits up to ``timeout`` seconds for the answer (the Spark results a spark worker reads for the
  console). The message expires after the same time, so a worker that comes back later does not answer a
  question nobody waits for any more; the answer is removed from the result backend once read. Each thread
  calls through an app of its own: the Redis result backend's subscriber is not safe to share between the web
  server's threads (celery/celery#4670).

Redis that cannot be reached is a ``ConnectionError``; no answer in time is :class:`WorkerTimeout`; a task that
raised is :class:`WorkerFailed`.
"""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery
from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from kombu.exceptions import OperationalError

_apps: dict[tuple[str, str], Celery] = {}
_lock = threading.Lock()
_local = threading.local()
# publish retries when Redis is briefly unavailable: about a second in all, then a 503
RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.3, "interval_max": 0.5}


class WorkerTimeout(TimeoutError):
    """No worker answered a :func:`call` in time (none consumes the task's queue, or all are busy)."""


class WorkerFailed(RuntimeError):
    """The worker ran the task and it raised (the text names the worker's exception)."""


def _key() -> tuple[str, str]:
    return str(settings.CELERY_BROKER_URL), str(getattr(settings, "CELERY_RESULT_BACKEND", "") or "")


def _new_app(broker_url: str) -> Celery:
    app = Celery("broker_core_console_sender", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=broker_url, broker_connection_timeout=3, broker_connection_retry=False,
                    result_backend_transport_options={"retry_policy": RETRY_POLICY})
    return app


def app() -> Celery:
    """The process's publishing app for the current ``CELERY_*`` settings."""
    key = _key()
    with _lock:
        found = _apps.get(key)
        if found is None:
            found = _apps[key] = _new_app(key[0])
        return found


def _thread_apps() -> dict[tuple[str, str], Celery]:
    apps: dict[tuple[str, str], Celery] = _local.__dict__.setdefault("apps", {})
    return apps


def send(task: str, kwargs: dict[str, object] | None = None) -> str:
    """Publish ``task`` (a registered task name) for a worker; returns the Celery task id."""
    try:
        result = app().send_task(task, kwargs=kwargs or {}, retry=True, retry_policy=RETRY_POLICY)
    except OperationalError as exc:
        raise ConnectionError(f"cannot reach Celery's broker (Redis): {exc}") from exc
    return str(result.id)


def call(task: str, kwargs: dict[str, object], timeout: float) -> Any:
    """Run ``task`` on a worker (routed by ``CELERY_TASK_ROUTES``) and return its answer, waiting at most
    ``timeout`` seconds (see the module docstring). A Redis that cannot be reached leaves the thread's app
    unusable ("must be restarted", says Celery's result consumer): it is dropped, and the next call makes another."""
    key, apps = _key(), _thread_apps()
    app = apps.get(key) or apps.setdefault(key, _new_app(key[0]))
    # what Redis being away raises: kombu's on publish, redis-py's (or the consumer's RuntimeError once it gave
    # up reconnecting) in the result backend
    unreachable = (OperationalError, RuntimeError, *app.backend.connection_errors)
    try:
        result = app.send_task(task, kwargs=kwargs, expires=timeout, retry=True, retry_policy=RETRY_POLICY)
        value = result.get(timeout=timeout, propagate=False)
    except CeleryTimeout:
        raise WorkerTimeout(f"no worker answered {task} within {timeout:g} s") from None
    except unreachable as exc:
        apps.pop(key, None)
        raise ConnectionError(f"cannot reach Celery's broker or result backend (Redis): {exc}") from exc
    try:
        if result.failed():
            raise WorkerFailed(f"{task} failed on the worker: {type(value).__name__}: {value}")
        return value
    finally:
        result.forget()
