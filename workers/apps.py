"""Django app for the scheduled jobs' records (job runs)."""

from __future__ import annotations

from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    default_auto_field = "django.db.models.BigAutoField"
