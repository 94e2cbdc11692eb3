"""Console services and selectors in-process: Django on a test database and an in-memory stand-in for the
SDK's AdminClient (:class:`FakeAdmin`), so this suite runs in the fast loop without a broker."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("DJANGO_DB_PATH", str(Path(tempfile.mkdtemp(prefix="console-unit-db-")) / "console.sqlite3"))

import django

django.setup()

import pytest  # noqa: E402

from console import broker_client  # noqa: E402
from tests.unit.console.fake_admin import FakeAdmin  # noqa: E402


@pytest.fixture
def fake_admin(settings: object) -> Iterator[FakeAdmin]:
    """A two-broker cluster held in memory, answering ``broker_client.admin()`` for the test."""
    settings.BROKER_CORE_NAMESRV = "fake-namesrv:9876"  # type: ignore[attr-defined]  # pytest-django's settings fixture
    fake = FakeAdmin({"broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.2:10911"})
    broker_client.install_admin(fake)
    yield fake
    broker_client.install_admin(None)
