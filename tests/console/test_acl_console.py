"""Broker ACL administration through the console API, on two real ACL brokers: viewers see versions and accounts
but never a secret; admins create (a generated secret answered once, never audited), update and delete accounts and
replace the white list on every broker with a per-broker result; a broker changed behind the console's back shows
out of step."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from broker_core.client import AdminClient
from console import broker_client
from console.models import AuditEvent
from tests.integration.acl_two_brokers import ADMIN, TwoBrokers, two_acl_brokers


@pytest.fixture(scope="module")
def acl_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoBrokers]:
    with two_acl_brokers(tmp_path_factory.mktemp("acl-console")) as b:
        yield b


@pytest.fixture
def on_acl_cluster(settings, acl_brokers: TwoBrokers) -> Iterator[TwoBrokers]:  # type: ignore[no-untyped-def]
    settings.BROKER_CORE_NAMESRV = acl_brokers.namesrv
    settings.BROKER_CORE_ACCESS_KEY, settings.BROKER_CORE_SECRET_KEY = ADMIN.access_key, ADMIN.secret_key
    yield acl_brokers
    broker_client.reset()


def test_acl_overview_shows_no_secret(on_acl_cluster: TwoBrokers, viewer: APIClient) -> None:
    resp = viewer.get("/api/v1/acl/")
    assert resp.status_code == 200, resp.content
    data = resp.json()
    assert sorted(b["addr"] for b in data["brokers"]) == sorted(on_acl_cluster.addrs)
    assert data["in_step"] is True
    assert {a["access_key"] for a in data["accounts"]} >= {"acl-admin01", "acl-reader1"}
    assert b"admin-secret" not in resp.content and b"reader-secret" not in resp.content


def test_admin_applies_accounts_everywhere(on_acl_cluster: TwoBrokers, viewer: APIClient, admin: APIClient) -> None:
    body = {"access_key": "console-app1", "new": True, "default_topic_perm": "PUB", "topic_perms": ["orders=PUB|SUB"],
            "group_perms": ["billing=SUB"]}
    assert viewer.post("/api/v1/acl/accounts/", body, format="json").status_code == 403
    resp = admin.post("/api/v1/acl/accounts/", body, format="json")
    assert resp.status_code == 200, resp.content
    out = resp.json()
    assert out["ok"] is True and [r["ok"] for r in out["results"]] == [True, True]
    secret = out["secret"]
    assert secret and len(secret) >= 20
    with AdminClient(on_acl_cluster.namesrv, credentials=ADMIN) as sdk:
        for addr in on_acl_cluster.addrs:
            [acc] = [a for a in sdk.acl_config(addr)["plainAccessConfigs"] if a["accessKey"] == "console-app1"]
            assert acc["secretKey"] == secret and acc["topicPerms"] == ["orders=PUB|SUB"]
        events = AuditEvent.objects.filter(action="acl.account.update")
        assert events.count() == 1 and secret not in str(events[0].before) + str(events[0].after)
        assert viewer.get("/api/v1/acl/").json()["in_step"] is True

        # an update that names no secret keeps it, and answers none
        upd = admin.post("/api/v1/acl/accounts/", {**body, "new": False, "admin": True}, format="json").json()
        assert upd["ok"] and upd["secret"] is None

        # one broker changed behind the console's back: out of step, and that broker is the one marked
        sdk.acl_update_account(on_acl_cluster.second.addr, {"accessKey": "console-app1", "defaultTopicPerm": "DENY"})
        data = viewer.get("/api/v1/acl/").json()
        assert data["in_step"] is False
        assert [b["in_step"] for b in data["brokers"]] == [False, False]  # one against one: no majority
        assert len({b["digest"] for b in data["brokers"]}) == 2

    white = admin.put("/api/v1/acl/global-white/", {"patterns": ["10.2.2.*"]}, format="json").json()
    assert white["ok"] is True
    assert viewer.get("/api/v1/acl/").json()["global_white"] == ["10.2.2.*"]
    gone = admin.delete("/api/v1/acl/accounts/console-app1/").json()
    assert gone["ok"] is True
    again = admin.delete("/api/v1/acl/accounts/console-app1/").json()
    assert again["ok"] is False and all("No acl config for console-app1" in r["error"] for r in again["results"])
    assert AuditEvent.objects.filter(action="acl.account.delete", ok=False).count() == 1
