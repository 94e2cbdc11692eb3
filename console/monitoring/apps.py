"""Django app for the monitoring records (label ``monitoring``)."""

from __future__ import annotations

from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "console.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"
    default_auto_field = "django.db.models.BigAutoField"
