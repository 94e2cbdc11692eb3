"""SDK clients on a module's ``cluster`` fixture (real name server and brokers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from broker_core.client import AdminClient, Producer


@pytest.fixture(scope="module")
def admin(cluster: Any) -> Iterator[AdminClient]:
    """An SDK admin client on the module's (or suite's) ``cluster`` fixture: real name server and brokers."""
    a = AdminClient(cluster.namesrv).start()
    yield a
    a.shutdown()


@pytest.fixture(scope="module")
def producer(cluster: Any) -> Iterator[Producer]:
    """An SDK producer on the module's (or suite's) ``cluster`` fixture."""
    p = Producer("it-producers", cluster.namesrv).start()
    yield p
    p.shutdown()
