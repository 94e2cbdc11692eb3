"""``manage.py ensure_admin``: make sure an admin account exists (first run of ``make run``).

Uses ``DJANGO_SUPERUSER_USERNAME`` / ``DJANGO_SUPERUSER_PASSWORD`` / ``DJANGO_SUPERUSER_EMAIL`` when set;
otherwise, if no superuser exists yet, creates ``admin`` with a random password and prints it once.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the first admin account (from DJANGO_SUPERUSER_* or with a printed random password)."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        name = os.environ.get("DJANGO_SUPERUSER_USERNAME")
        if name:
            if not users.objects.filter(username=name).exists():
                users.objects.create_superuser(name, os.environ.get("DJANGO_SUPERUSER_EMAIL", ""),
                                               os.environ.get("DJANGO_SUPERUSER_PASSWORD") or secrets.token_urlsafe(12))
                self.stdout.write(f"created admin user {name!r} from DJANGO_SUPERUSER_*")
            return
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "", password)
        self.stdout.write(self.style.WARNING(f"created admin user 'admin' with password {password!r} "
                                             "(change it, or set DJANGO_SUPERUSER_* before the first run)"))
