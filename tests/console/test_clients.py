"""A group's live clients through the console API: running info of each (GET_CONSUMER_RUNNING_INFO through the
broker) and direct consumption of a stored message (CONSUME_MESSAGE_DIRECTLY, operators, audited)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rest_framework.test import APIClient

from broker_core.client import AdminClient, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from console.models import AuditEvent
from tests.integration.cluster import Cluster, wait_until


@dataclass
class Live:
    topic: str
    group: str
    consumer: PushConsumer
    ok_id: str  # offset ids, stored with a tag the consumer does not pull
    boom_id: str
    seen: list[bytes] = field(default_factory=list)

    @property
    def client_id(self) -> str:
        return self.consumer.instance.client_id


@contextmanager
def live_consumer(cluster: Cluster, admin: AdminClient, unique: Callable[[str], str]) -> Iterator[Live]:
    """A push consumer online on a fresh topic (2 queues, 3 messages consumed), and two more messages it never
    pulls (tag ``direct``): ``ok`` succeeds when consumed directly, ``boom`` makes the listener raise."""
    topic, group = unique("Live"), unique("live-group")
    admin.create_topic(topic, 2, 2)
    wait_until(lambda: topic in admin.topic_list(), timeout=30, what=f"route of {topic}")
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        with lock:
            seen.extend(m.body for m in msgs)
        if msgs[0].body.startswith(b"boom"):
            raise ValueError("cannot handle boom")
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group, cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    c.subscribe(topic, "normal")
    c.register_message_listener(listener)
    c.start()
    try:
        with Producer(unique("lp"), cluster.namesrv) as p:
            for i in range(3):
                p.send(Message(topic, f"m{i}".encode(), tags="normal"))
            ok_id = p.send(Message(topic, b"ok-direct", tags="direct")).offset_msg_id
            boom_id = p.send(Message(topic, b"boom-direct", tags="direct")).offset_msg_id
        wait_until(lambda: len(seen) >= 3, timeout=60, what="the live consumer's first messages")
        yield Live(topic, group, c, ok_id, boom_id, seen)
    finally:
        c.shutdown()


def test_group_clients_running_info(cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str],
                                    viewer: APIClient) -> None:
    with live_consumer(cluster, sdk_admin, unique) as live:
        resp = viewer.get(f"/api/v1/consumer-groups/{live.group}/clients/")
        assert resp.status_code == 200, resp.content
        [row] = resp.json()["results"]
        assert row["client_id"] == live.client_id and row["language"] == "PYTHON" and row["error"] is None
        running = row["running"]
        assert {s["topic"]: s["expression"] for s in running["subscriptions"]}[live.topic] == "normal"
        queues = [q for q in running["queues"] if q["topic"] == live.topic]
        assert sorted(q["queue_id"] for q in queues) == [0, 1]
        assert all(q["last_pull"] for q in queues)
        assert running["properties"]["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
        one = viewer.get(f"/api/v1/consumer-groups/{live.group}/clients/{live.client_id}/running-info/?jstack=true")
        assert one.status_code == 200 and one.json()["jstack"] is None  # stacks are for operators
        missing = viewer.get(f"/api/v1/consumer-groups/{live.group}/clients/10.1.1.1@9@x/running-info/")
        assert missing.status_code == 409 and missing.json()["error"] == "client_not_online"


def test_consume_directly_is_for_operators_and_audited(cluster: Cluster, sdk_admin: AdminClient,
                                                       unique: Callable[[str], str], viewer: APIClient,
                                                       operator: APIClient) -> None:
    with live_consumer(cluster, sdk_admin, unique) as live:
        url = f"/api/v1/messages/{live.ok_id}/consume-directly/"
        body = {"group": live.group, "client_id": live.client_id}
        assert viewer.post(url, body, format="json").status_code == 403
        resp = operator.post(url, body, format="json")
        assert resp.status_code == 200, resp.content
        out = resp.json()
        assert out["consume_result"] == "CR_SUCCESS" and out["remark"] is None and out["spent_ms"] >= 0
        assert b"ok-direct" in live.seen
        boom = operator.post(f"/api/v1/messages/{live.boom_id}/consume-directly/", body, format="json").json()
        assert boom["consume_result"] == "CR_THROW_EXCEPTION"
        assert boom["remark"].startswith("ValueError: cannot handle boom")
        events = AuditEvent.objects.filter(action="message.consume_directly").order_by("id")
        assert [e.target for e in events] == [live.ok_id, live.boom_id]
        assert events[1].after["consume_result"] == "CR_THROW_EXCEPTION"
        gone = operator.post(url, {"group": live.group, "client_id": "10.1.1.1@9@x"}, format="json")
        assert gone.status_code == 409
        assert AuditEvent.objects.filter(action="message.consume_directly", ok=False).count() == 1
