"""App configuration."""

from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The console app: audit events, roles and the REST API."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"
