"""The console's migrations apply, roll back to zero and apply again, on SQLite and on PostgreSQL.

Each database is a fresh one of the test's own, migrated by a separate Django process (``DATABASE_URL``), as
``make run`` and a deployment migrate. The PostgreSQL case runs where ``DATABASE_URL`` names a PostgreSQL server
(``make test`` runs this suite a second time so, through ``tests/postgres.py``); the main run skips it and says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import ROOT

# Every app of ours with migrations (each rolls back to zero on its own)
LABELS = ["console", "monitoring", "alerts"]

ROUND_TRIP = """
import json, sys, django
django.setup()
from django.apps import apps
from django.core.management import call_command
from django.db import connection

labels = sys.argv[1:]
ours = {m._meta.db_table for label in labels for m in apps.get_app_config(label).get_models() if m._meta.managed}
tables = lambda: sorted(set(connection.introspection.table_names()) & ours)
call_command("migrate", verbosity=0, interactive=False)
applied = tables()
for label in labels:
    call_command("migrate", label, "zero", verbosity=0, interactive=False)
rolled_back = tables()
call_command("migrate", verbosity=0, interactive=False)
print(json.dumps({"vendor": connection.vendor, "ours": sorted(ours), "applied": applied,
                  "rolled_back": rolled_back, "reapplied": tables()}))
"""


def _postgres_server_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if urlsplit(url).scheme in {"postgres", "postgresql", "pgsql"} else None


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The ``DATABASE_URL`` of an empty database of this test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrations.sqlite3'}"
        return
    server = _postgres_server_url()
    if server is None:
        pytest.skip("no PostgreSQL here: DATABASE_URL is not postgres:// (make test's PostgreSQL step sets it)")
    import psycopg

    name = f"migrations_{os.getpid()}"
    parts = urlsplit(server)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_migrations_apply_roll_back_to_zero_and_apply_again(fresh_database: str) -> None:
    env = {**os.environ, "DATABASE_URL": fresh_database, "DJANGO_SETTINGS_MODULE": "console.settings",
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", ROUND_TRIP, *LABELS], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["vendor"] == ("sqlite" if fresh_database.startswith("sqlite") else "postgresql")
    assert "console_job" in result["ours"]  # the app registry really listed our models
    assert result["applied"] == result["ours"]
    assert result["rolled_back"] == []
    assert result["reapplied"] == result["ours"]
