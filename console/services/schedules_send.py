"""The one console module that imports Celery: it sends a scheduled job's task by name ("run now").

Why here and why this way: dependencies flow ``workers -> console``, never back, so the console may not import
:mod:`workers` (the task functions or the worker's app). It does not need them: Celery delivers a task by its
registered name, so a small producer-only :class:`celery.Celery` app, configured from the same ``CELERY_*``
settings as the worker's app (broker URL, serializer, default queue), publishes ``send_task("workers.<job>")``
and the worker runs it as if beat had sent it. The import-linter contract "the console reaches brokers only
through the SDK" forbids ``celery`` in the console except for exactly this module (its ``ignore_imports``).

Publishing does not wait for the task: it returns the task id. Redis that cannot be reached is a
``ConnectionError`` (the API's 503).
"""

from __future__ import annotations

import threading

from celery import Celery
from django.conf import settings
from kombu.exceptions import OperationalError

_apps: dict[str, Celery] = {}
_lock = threading.Lock()
# publish retries when Redis is briefly unavailable: about a second in all, then a 503
RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.3, "interval_max": 0.5}


def _app() -> Celery:
    url = str(settings.CELERY_BROKER_URL)
    with _lock:
        app = _apps.get(url)
        if app is None:
            app = Celery("broker_core_console_sender", set_as_current=False)
            app.config_from_object("django.conf:settings", namespace="CELERY")
            app.conf.update(broker_url=url, broker_connection_timeout=3, broker_connection_retry=False)
            _apps[url] = app
        return app


def send(task: str, kwargs: dict[str, object] | None = None) -> str:
    """Publish ``task`` (a registered task name) for a worker; returns the Celery task id."""
    try:
        result = _app().send_task(task, kwargs=kwargs or {}, retry=True, retry_policy=RETRY_POLICY)
    except OperationalError as exc:
        raise ConnectionError(f"cannot reach Celery's broker (Redis): {exc}") from exc
    return str(result.id)
