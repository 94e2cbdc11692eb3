"""App configuration."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def ensure_role_groups(sender: AppConfig, **kwargs: Any) -> None:
    """The role groups exist after every migrate and every test-database flush (the data migration only
    runs once, and transactional test cases wipe tables)."""
    from django.contrib.auth.models import Group

    from console.roles import ROLES

    for name in ROLES:
        Group.objects.get_or_create(name=name)


class ConsoleConfig(AppConfig):
    """The console app: audit events, roles, the REST API and the pages."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console import audit_hooks
        from console.services import tokens

        post_migrate.connect(ensure_role_groups, sender=self)
        audit_hooks.connect()
        tokens.connect()
