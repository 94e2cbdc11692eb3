"""``python manage.py install_schedules [--reset]``: put every beat entry of :mod:`workers.schedule` into
django-celery-beat's tables (idempotent; ``--reset`` restores the defaults over an operator's edits)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workers.schedule import install_schedules


class Command(BaseCommand):
    help = "Install the broker maintenance schedules (retention, disk check, delayed delivery, sampling, prune)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reset", action="store_true", help="restore each entry's default schedule")

    def handle(self, *args: Any, **options: Any) -> None:
        for name, what in install_schedules(reset=options["reset"]):
            self.stdout.write(f"{what:8} {name}")
