"""``manage.py create_api_token USERNAME [--rotate] [--expires-days N]``: print a new API token's key (once).

The console keeps only the key's hash (:mod:`console.services.tokens`); the action is audited as the system.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.errors import ApiError
from console.services.users import create_token


class Command(BaseCommand):
    help = "Create (or with --rotate replace) a user's API token and print its key; it is not shown again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="replace the user's current token")
        parser.add_argument("--expires-days", type=int, default=None,
                            help="lifetime in days (default CONSOLE_API_TOKEN_TTL_DAYS)")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user {options['username']!r}")
        try:
            key = create_token(None, user, rotate=options["rotate"], expires_days=options["expires_days"])
        except ApiError as exc:
            raise CommandError(str(exc.detail)) from None
        self.stdout.write(f"Generated token {key} for user {user.get_username()}")
