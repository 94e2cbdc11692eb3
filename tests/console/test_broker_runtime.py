"""A broker's GET_BROKER_RUNTIME_INFO table in full, through the console (API and page), for brokers the name
server lists only."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from tests.integration.cluster import Cluster


def test_runtime_table_api_and_page(cluster: Cluster, viewer: APIClient) -> None:
    addr = cluster.brokers["broker-a"].addr
    resp = viewer.get(f"/api/v1/cluster/brokers/{addr}/runtime/")
    assert resp.status_code == 200, resp.content
    data = resp.json()
    assert data["broker_name"] == "broker-a" and data["broker_id"] == "0"
    assert {"brokerVersionDesc", "putTps", "commitLogMaxOffset", "msgPutTotalTodayNow"} <= set(data["runtime"])
    user = User.objects.create_user("runtime-viewer", password="pw")
    user.groups.add(Group.objects.get(name="viewer"))
    browser = Client()
    browser.force_login(user)
    page = browser.get(f"/cluster/brokers/{addr}/runtime/")
    assert page.status_code == 200
    assert b'data-key="commitLogMaxOffset"' in page.content
    assert viewer.get("/api/v1/cluster/brokers/10.9.9.9:10911/runtime/").status_code == 404
