"""Topics and groups exported as RocketMQ's JSON and imported again (API, real broker): the export holds the
user's topics and groups with RocketMQ's fields; an import creates what it lists on the brokers and says per
entry what happened; viewers may export, only admins import."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from broker_core.client import AdminClient
from console.models import AuditEvent


def test_export_then_import(sdk_admin: AdminClient, unique: Callable[[str], str], viewer: APIClient,
                            admin: APIClient) -> None:
    topic, group = unique("Exported"), unique("exported-group")
    sdk_admin.create_topic(topic, 3, 2, perm=4)
    broker = sdk_admin.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"]
    sdk_admin.update_subscription_group(broker, {"groupName": group, "retryMaxTimes": 5,
                                                 "consumeBroadcastEnable": True})
    topics = viewer.get("/api/v1/export/topics/").json()
    entry = topics["topicConfigTable"][topic]
    assert (entry["topicName"], entry["readQueueNums"], entry["writeQueueNums"], entry["perm"]) == (topic, 3, 2, 4)
    assert not any(n.startswith(("%RETRY%", "RMQ_SYS_")) or n == "TBW102" for n in topics["topicConfigTable"])
    groups = viewer.get("/api/v1/export/groups/").json()["subscriptionGroupTable"]
    assert groups[group]["retryMaxTimes"] == 5 and "TOOLS_CONSUMER" not in groups

    new_topic, new_group = unique("Imported"), unique("imported-group")
    doc = {"topicConfigTable": {new_topic: {**entry, "topicName": new_topic}, "bad topic!": {}}}
    assert viewer.post("/api/v1/import/topics/", doc, format="json").status_code == 403
    out = admin.post("/api/v1/import/topics/", doc, format="json").json()
    assert {r["name"]: r["ok"] for r in out["results"]} == {new_topic: True, "bad topic!": False}
    assert sdk_admin.export_topics()["topicConfigTable"][new_topic]["readQueueNums"] == 3
    out = admin.post("/api/v1/import/groups/", {"subscriptionGroupTable": {new_group: groups[group]}},
                     format="json").json()
    assert out["ok"] is True
    assert sdk_admin.export_groups()["subscriptionGroupTable"][new_group]["retryMaxTimes"] == 5
    assert admin.post("/api/v1/import/groups/", {"nope": 1}, format="json").status_code == 400
    assert AuditEvent.objects.filter(action="topics.import", ok=False).count() == 1
    assert viewer.get("/api/v1/export/other/").status_code == 404
