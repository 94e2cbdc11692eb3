"""Django app for the Celery tasks and the ``install_schedules`` command (the records they write live in
:mod:`console.monitoring`)."""

from __future__ import annotations

from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    default_auto_field = "django.db.models.BigAutoField"
