"""The Celery app of the console's workers and beat.

Configured from Django settings with the ``CELERY_`` namespace (``CELERY_BROKER_URL`` comes from
``REDIS_URL``); tasks live in :mod:`workers.tasks`; beat reads its schedule from django-celery-beat's tables,
which :mod:`workers.schedule` fills (``python manage.py install_schedules``)::

    celery -A workers.celery worker --pool=solo
    celery -A workers.celery beat
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("broker_core_console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"], related_name="tasks")

from workers import metrics  # noqa: E402,F401  (its signal handlers: /metrics with BROKER_CORE_WORKER_METRICS_PORT)
