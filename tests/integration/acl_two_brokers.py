"""Two real brokers with ``aclEnable=true`` in one cluster (``broker-acl`` from :class:`AclCluster` and
``broker-acl-b``), each with its own ``plain_acl.yml``: for the ACL administration suites (integration, console,
browser)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker_core.client import AdminClient
from broker_core.protocol.acl import SessionCredentials
from tests.integration.acl_cluster import CLUSTER_SECRET, AclCluster
from tests.integration.cluster import BrokerProcess, wait_until

ACL = """
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: acl-admin01
    secretKey: admin-secret
    admin: true
  - accessKey: acl-reader1
    secretKey: reader-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
ADMIN = SessionCredentials("acl-admin01", "admin-secret")
READER = SessionCredentials("acl-reader1", "reader-secret")


class TwoBrokers:
    def __init__(self, c: AclCluster, second: BrokerProcess) -> None:
        self.c, self.second = c, second
        self.second_acl = second.store_dir / "config" / "plain_acl.yml"

    @property
    def namesrv(self) -> str:
        return self.c.namesrv

    @property
    def addrs(self) -> list[str]:
        return [self.c.broker.addr, self.second.addr]


@contextmanager
def two_acl_brokers(tmp: Path, acl: str = ACL) -> Iterator[TwoBrokers]:
    c = AclCluster(tmp, acl)
    store = tmp / "broker-acl-b" / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / "plain_acl.yml").write_text(acl)
    second = BrokerProcess("broker-acl-b", store, c.namesrv, tmp / "broker-acl-b.log",
                           f"aclEnable=true\nclusterSecret={CLUSTER_SECRET}\n").start()
    try:
        with AdminClient(c.namesrv) as admin:
            wait_until(lambda: "broker-acl-b" in admin.cluster_info().get("brokerAddrTable", {}), timeout=30,
                       what="the second broker to register")
        yield TwoBrokers(c, second)
    finally:
        second.stop()
        c.close()
