"""``manage.py ensure_secret_key``: write a random ``SECRET_KEY`` to ``var/secret_key`` (mode 0600) once.

``make run`` calls it first; an existing file is kept, so signed cookies stay valid across restarts. The path is
``DJANGO_SECRET_KEY_FILE`` when set; ``DJANGO_SECRET_KEY`` in the environment still takes precedence at run time.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from console.secret_key import ensure_key_file, key_file


class Command(BaseCommand):
    help = "Create var/secret_key (a random SECRET_KEY, mode 0600) unless it exists."

    def handle(self, *args: Any, **options: Any) -> None:
        path = key_file(settings.BASE_DIR)
        if ensure_key_file(path):
            self.stdout.write(f"wrote a new SECRET_KEY to {path} (mode 0600)")
