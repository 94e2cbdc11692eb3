"""Console API tests against a real name server and broker (subprocesses on free ports).

Django is configured here (not in pyproject.toml): ``DJANGO_SETTINGS_MODULE`` is set before pytest-django's
session fixtures run, and the SQLite file lives in a temp dir (tests use an in-memory test database anyway).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("DJANGO_DB_PATH", str(Path(tempfile.mkdtemp(prefix="console-db-")) / "console.sqlite3"))

import django

django.setup()

import pytest  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from broker_core.client import AdminClient  # noqa: E402
from console import broker_client  # noqa: E402
from console.services.tokens import issue  # noqa: E402
from tests.integration.cluster import Cluster, free_port, wait_until  # noqa: E402 - re-exported

_names = count()



@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and one broker, ``broker-a``, for the whole console suite."""
    c = Cluster(tmp_path_factory.mktemp("console-cluster"))
    try:
        # SQL92 receive and pulls; RocketMQ 5 gRPC for the official client's tests
        yield c.add_brokers_registered({"broker-a": "enablePropertyFilter=true\ngrpcListenPort=0\n"})
    finally:
        broker_client.reset()
        c.close()


@pytest.fixture(scope="session")
def sdk_admin(cluster: Cluster) -> Iterator[AdminClient]:
    """An SDK admin client of the test's own, for arranging state behind the console's back."""
    with AdminClient(cluster.namesrv) as admin:
        yield admin


@pytest.fixture(autouse=True)
def _console_env(db: None, settings, cluster: Cluster) -> None:  # type: ignore[no-untyped-def]
    """Every test has database access and a console pointed at the test cluster; API throttles are off (the
    throttling tests turn them on with rates of their own); the cache of the brokers' answers is checked on every
    read (console.selectors.broker_cache)."""
    settings.BROKER_CORE_NAMESRV = cluster.namesrv
    settings.CONSOLE_API_THROTTLE_RATES = {"anon": None, "user": None}
    settings.CONSOLE_BROKER_CACHE_S = 0  # lists see what tests arrange behind the console's back at once


@pytest.fixture
def unique() -> Callable[[str], str]:
    """``unique("Orders")`` -> a topic or group name no other test uses."""
    return lambda prefix: f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def topic(sdk_admin: AdminClient, unique: Callable[[str], str]) -> str:
    """A fresh topic with 2 queues on broker-a."""
    name = unique("T")
    sdk_admin.create_topic(name, 2, 2)
    wait_until(lambda: name in sdk_admin.topic_list(), timeout=30, what=f"route of {name}")
    return name


def _client(role: str | None, username: str) -> APIClient:
    user = User.objects.create_user(username, password="pw")
    if role == "superuser":
        user.is_superuser = True
        user.save()
    elif role:
        user.groups.add(Group.objects.get(name=role))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue(user)[1]}")
    return client


@pytest.fixture
def viewer() -> APIClient:
    return _client("viewer", "vera")


@pytest.fixture
def operator() -> APIClient:
    return _client("operator", "otto")


@pytest.fixture
def admin() -> APIClient:
    return _client("admin", "ada")


@pytest.fixture
def superuser() -> APIClient:
    return _client("superuser", "root")


@pytest.fixture
def nobody() -> APIClient:
    """Authenticated but in no role group."""
    return _client(None, "nemo")


@pytest.fixture
def broker_down(settings) -> str:  # type: ignore[no-untyped-def]
    """Point the console at a name server address nothing listens on."""
    settings.BROKER_CORE_NAMESRV = f"127.0.0.1:{free_port()}"
    return settings.BROKER_CORE_NAMESRV
