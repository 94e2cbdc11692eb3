"""ACL administration over the wire (codes 50-54) on two real brokers with ``aclEnable=true``: each broker rewrites
its own ``plain_acl.yml`` (atomically, ``dataVersion`` bumped) and enforces the change at once; 52 shows the
versions, so a broker left out is visible; only admin accounts may call them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from broker_core.client import AdminClient, ClientError, Message, Producer
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from tests.integration.acl_cluster import ACL_EXCEPTION, call
from tests.integration.acl_two_brokers import ADMIN, READER, TwoBrokers, two_acl_brokers

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoBrokers]:
    with two_acl_brokers(tmp_path_factory.mktemp("acl-admin")) as b:
        with AdminClient(b.namesrv, credentials=ADMIN) as admin:
            admin.create_topic("AclAdminT", 1, 1)
        yield b


@pytest.fixture(scope="module")
def admin(brokers: TwoBrokers) -> Iterator[AdminClient]:
    with AdminClient(brokers.c.namesrv, credentials=ADMIN) as a:
        yield a


def test_non_admin_accounts_are_refused(brokers: TwoBrokers) -> None:
    for code in (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
                 RequestCode.GET_BROKER_CLUSTER_ACL_INFO):
        resp = call(brokers.c.broker.addr, code, {"accessKey": "acl-sneaky1", "secretKey": "sneaky-secret",
                                                  "admin": "true"}, credentials=READER)
        assert resp.code == ResponseCode.NO_PERMISSION
        assert resp.remark.startswith(ACL_EXCEPTION + f"Need admin permission for request code={int(code)}")


def test_create_update_delete_an_account_everywhere(brokers: TwoBrokers, admin: AdminClient) -> None:
    assert sorted(admin.acl_brokers()) == sorted(brokers.addrs)
    before = {a: admin.acl_version(a)["counter"] for a in brokers.addrs}
    account = {"accessKey": "acl-writer1", "secretKey": "writer-secret", "admin": False,
               "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB", "topicPerms": "AclAdminT=PUB",
               "groupPerms": ""}
    results = admin.acl_everywhere(brokers.addrs, lambda a: admin.acl_update_account(a, account))
    assert results == {a: None for a in brokers.addrs}
    doc = yaml.safe_load(brokers.c.acl_path.read_text())
    written = doc["accounts"][-1]
    assert list(written) == ["accessKey", "secretKey", "admin", "defaultTopicPerm", "defaultGroupPerm",
                             "topicPerms", "groupPerms"]
    assert written["topicPerms"] == ["AclAdminT=PUB"] and doc["dataVersion"][0]["counter"] == 1
    assert {a: admin.acl_version(a)["counter"] for a in brokers.addrs} == {a: n + 1 for a, n in before.items()}
    cfg = admin.acl_config(brokers.second.addr)
    assert [a["accessKey"] for a in cfg["plainAccessConfigs"]] == ["acl-admin01", "acl-reader1", "acl-writer1"]

    # enforced at once: the new account may publish to its topic, and nothing else
    with Producer("acl-admin-pg", brokers.c.namesrv, credentials=SessionCredentials("acl-writer1",
                                                                                  "writer-secret")) as p:
        assert p.send(Message("AclAdminT", b"allowed")).msg_id
    # an update keeps what it does not name, and moves the account to the end
    admin.acl_update_account(brokers.c.broker.addr, {"accessKey": "acl-reader1", "defaultTopicPerm": "PUB|SUB"})
    doc = yaml.safe_load(brokers.c.acl_path.read_text())
    assert [a["accessKey"] for a in doc["accounts"]] == ["acl-admin01", "acl-writer1", "acl-reader1"]
    assert doc["accounts"][-1]["secretKey"] == "reader-secret"
    # the brokers are now out of step, and 52 shows it
    versions = {a: admin.acl_version(a) for a in brokers.addrs}
    assert versions[brokers.c.broker.addr]["counter"] == versions[brokers.second.addr]["counter"] + 1
    assert versions[brokers.c.broker.addr]["file"] == str(brokers.c.acl_path)

    results = admin.acl_everywhere(brokers.addrs, lambda a: admin.acl_delete_account(a, "acl-writer1"))
    assert results == {a: None for a in brokers.addrs}
    with pytest.raises(ClientError) as err:
        admin.acl_delete_account(brokers.c.broker.addr, "acl-writer1")
    assert err.value.code == 210


def test_bad_requests_change_nothing(brokers: TwoBrokers, admin: AdminClient) -> None:
    addr = brokers.c.broker.addr
    text = brokers.c.acl_path.read_text()
    for account, reason in (({"accessKey": "short", "secretKey": "long-enough"}, "accessKey should be longer"),
                            ({"accessKey": "acl-newbie1", "secretKey": "tiny"}, "secretKey should be longer"),
                            ({"accessKey": "acl-newbie1", "secretKey": "long-enough", "topicPerms": "t=ALL"},
                             "must be one of")):
        with pytest.raises(ClientError) as err:
            admin.acl_update_account(addr, account)
        assert err.value.code == 209 and reason in str(err.value)
    assert brokers.c.acl_path.read_text() == text


def test_global_white_list(brokers: TwoBrokers, admin: AdminClient) -> None:
    addr = brokers.second.addr
    admin.acl_set_global_white(addr, ["10.1.1.*", "192.168.0.7"])
    assert admin.acl_config(addr)["globalWhiteAddrs"] == ["10.1.1.*", "192.168.0.7"]
    assert yaml.safe_load(brokers.second_acl.read_text())["globalWhiteRemoteAddresses"] == ["10.1.1.*",
                                                                                            "192.168.0.7"]
    resp = call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                {"globalWhiteAddrs": "10.0.0.1", "aclFileFullPath": "/etc/other.yml"}, credentials=ADMIN)
    assert resp.code == 211 and "is not this broker's ACL file" in resp.remark
