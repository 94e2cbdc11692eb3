"""``broker-console``: the console's management command (Django's ``manage.py``) as an installed script, e.g.
``broker-console migrate``, ``broker-console createsuperuser``, ``broker-console --help``."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
