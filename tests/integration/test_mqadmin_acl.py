"""mqadmin's ACL 1.0 commands against a broker with aclEnable: an account created, seen in the file's version,
the global white list replaced, the account deleted; credentials from flags and from the environment; an account
that is not admin is refused."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest

from broker_core.tools.mqadmin import main
from tests.integration.acl_cluster import AclCluster
from tests.integration.cluster import wait_until

pytestmark = pytest.mark.integration

ACL = """
globalWhiteRemoteAddresses: [10.9.9.*]
accounts:
  - accessKey: acl-admin01
    secretKey: admin-secret
    admin: true
  - accessKey: acl-user01
    secretKey: user-secret
    defaultTopicPerm: PUB
"""
ADMIN_FLAGS = ["--access-key", "acl-admin01", "--secret-key", "admin-secret"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(tmp_path_factory.mktemp("mqadmin-acl"), ACL)
    try:
        yield c
    finally:
        c.close()


def mqadmin(cluster: AclCluster, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main([*args, "-n", cluster.namesrv], out, err, env=env or {})
    return rc, out.getvalue(), err.getvalue()


def test_acl_commands(cluster: AclCluster) -> None:
    addr = cluster.broker.addr
    rc, out, err = mqadmin(cluster, "updateAclConfig", "-b", addr, "-a", "acl-new001", "-s", "new-secret1",
                           "-t", "TopicA=PUB,TopicB=SUB", "-i", "DENY", *ADMIN_FLAGS)
    assert rc == 0, err
    assert out == f"create or update plain access config to {addr} success.\n"
    wait_until(lambda: "acl-new001" in cluster.acl_path.read_text(), what="the account in plain_acl.yml")
    rc, out, err = mqadmin(cluster, "clusterAclConfigVersion", "-c", "DefaultCluster",
                           env={"ROCKETMQ_ACCESS_KEY": "acl-admin01", "ROCKETMQ_SECRET_KEY": "admin-secret"})
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "get cluster's plain access config version success."
    assert lines[1].split() == ["#Cluster", "Name", "#Broker", "Name", "#Broker", "Addr", "#AclFilePath",
                                "#AclConfigVersionNum", "#AclLastUpdateTime"]
    row = r"DefaultCluster +broker-acl +" + re.escape(addr) + r" +\S*plain_acl\.yml +\d+ +\d{4}-"
    assert re.match(row, lines[2]), out
    rc, out, err = mqadmin(cluster, "updateGlobalWhiteAddr", "-b", addr, "-g", "10.10.103.*,192.168.0.*",
                           *ADMIN_FLAGS)
    assert rc == 0 and out == f"update global white remote addresses to {addr} success.\n", err
    wait_until(lambda: "10.10.103.*" in cluster.acl_path.read_text(), what="the white list in plain_acl.yml")
    rc, out, err = mqadmin(cluster, "deleteAclConfig", "-b", addr, "-a", "acl-new001", *ADMIN_FLAGS)
    assert rc == 0 and out == (f"delete plain access config account from {addr} success.\n"
                               "account's accesskey is:acl-new001"), err
    assert "acl-new001" not in cluster.acl_path.read_text()


def test_acl_commands_refused_without_an_admin_account(cluster: AclCluster) -> None:
    rc, _out, err = mqadmin(cluster, "deleteAclConfig", "-b", cluster.broker.addr, "-a", "acl-user01",
                            "--access-key", "acl-user01", "--secret-key", "user-secret")
    assert rc == 2 and "AclException" in err, err
    rc, _out, err = mqadmin(cluster, "deleteAclConfig", "-b", cluster.broker.addr, "-a", "acl-user01")
    assert rc == 2, err  # unsigned
