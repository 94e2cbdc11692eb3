"""Data migration: the role groups ``viewer``, ``operator`` and ``admin`` (see console.roles)."""

from __future__ import annotations

from django.db import migrations

ROLES = ("viewer", "operator", "admin")


def create_roles(apps, schema_editor):  # type: ignore[no-untyped-def]
    group = apps.get_model("auth", "Group")
    for name in ROLES:
        group.objects.get_or_create(name=name)


def delete_roles(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0001_audit_event"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_roles, delete_roles)]
