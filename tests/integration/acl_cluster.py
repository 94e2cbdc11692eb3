"""A real name server with a cluster secret and a broker with ``aclEnable=true`` and a ``plain_acl.yml``, for the
ACL suites (tests/integration/test_acl.py, tests/compat/test_cpp_client_acl.py)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from broker_core.client import AdminClient
from broker_core.protocol import RemotingCommand
from broker_core.protocol.acl import SessionCredentials
from broker_core.remoting.client import RemotingClient, run_sync
from tests.integration.cluster import BrokerProcess, _start, wait_until

CLUSTER_SECRET = "cluster-secret-for-tests"
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "


class AclCluster:
    """``namesrv`` (started with ``--cluster-secret``) and ``broker`` (aclEnable, the same clusterSecret), the
    broker's ACL file at ``acl_path``; :meth:`write_acl` replaces it (the broker reloads it on its own)."""

    def __init__(self, tmp: Path, acl_yaml: str, broker_conf: str = "") -> None:
        self.tmp = tmp
        self.namesrv_proc, port = _start(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0",
                                          "--scan-interval-ms", "500", "--broker-expire-ms", "5000",
                                          "--cluster-secret", CLUSTER_SECRET], tmp / "namesrv.log")
        self.namesrv = f"127.0.0.1:{port}"
        store = tmp / "broker-acl" / "store"
        self.acl_path = store / "config" / "plain_acl.yml"
        self.acl_path.parent.mkdir(parents=True)
        self.acl_path.write_text(acl_yaml)
        self.broker = BrokerProcess("broker-acl", store, self.namesrv, tmp / "broker-acl.log",
                                    f"aclEnable=true\nclusterSecret={CLUSTER_SECRET}\n" + broker_conf).start()
        with AdminClient(self.namesrv) as admin:  # the name server needs no signature from readers
            wait_until(lambda: "broker-acl" in admin.cluster_info().get("brokerAddrTable", {}), timeout=30,
                       what="the ACL broker to register")

    def write_acl(self, text: str) -> None:
        tmp = self.acl_path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.acl_path)  # a new inode: the broker sees the change whatever the mtime granularity

    def close(self) -> None:
        self.broker.stop()
        self.namesrv_proc.send_signal(signal.SIGTERM)
        self.namesrv_proc.wait(timeout=30)


def call(addr: str, code: int, header: dict[str, Any] | None = None, body: bytes = b"",
         credentials: SessionCredentials | None = None, serialize_type: int | None = None) -> RemotingCommand:
    """One request on a fresh connection, signed with ``credentials`` when given; the response."""
    client = RemotingClient(credentials=credentials, serialize_type=serialize_type)
    try:
        return run_sync(client.invoke(addr, RemotingCommand.request(code, header or {}, body), 10.0))
    finally:
        run_sync(client.close())
