"""Fixtures shared by the integration modules. Each module defines its own module-scoped ``cluster``
(real name server and broker processes); these build SDK clients on whichever cluster that is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, Producer
from tests.integration.cluster import Cluster


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    a = AdminClient(cluster.namesrv).start()
    yield a
    a.shutdown()


@pytest.fixture(scope="module")
def producer(cluster: Cluster) -> Iterator[Producer]:
    p = Producer("it-producers", cluster.namesrv).start()
    yield p
    p.shutdown()
