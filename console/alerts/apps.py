"""Django app for alert rules, alerts and their notifications (label ``alerts``)."""

from __future__ import annotations

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "console.alerts"
    label = "alerts"
    verbose_name = "Alerts"
    default_auto_field = "django.db.models.BigAutoField"
