"""Per-group consumption status of a message (API): one message, four groups — one consumed it, one is behind it,
one's subscription filters it out, one dead-lettered it — and each shows its state with the evidence."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rest_framework.test import APIClient

from broker_core.client import (
    AdminClient,
    ConsumeStatus,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from tests.integration.cluster import Cluster, wait_until


@dataclass
class Scenario:
    topic: str
    msg_id: str
    groups: dict[str, str]  # expected state -> group


@contextmanager
def four_groups(cluster: Cluster, admin: AdminClient, unique: Callable[[str], str]) -> Iterator[Scenario]:
    topic = unique("Tracked")
    admin.create_topic(topic, 1, 1)
    wait_until(lambda: topic in admin.topic_list(), timeout=30, what=f"route of {topic}")
    with Producer(unique("tp"), cluster.namesrv) as producer:
        msg_id = producer.send(Message(topic, b"tracked", tags="red")).msg_id
    groups = {state: unique(state.replace("_", "-")) for state in
              ("consumed", "not_consumed", "filtered", "dead_lettered")}
    mq = MessageQueue(topic, "broker-a", 0)
    for state, commit in (("consumed", 1), ("not_consumed", 0)):
        pc = PullConsumer(groups[state], cluster.namesrv).start()
        pc.commit_offset(mq, commit)
        pc.shutdown()
    filt = PushConsumer(groups["filtered"], cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    filt.subscribe(topic, "blue")  # online, and its tag does not match
    filt.register_message_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    filt.start()
    dead = SimpleConsumer(groups["dead_lettered"], cluster.namesrv, max_reconsume_times=0).start()
    dead.subscribe(topic)
    wait_until(lambda: dead.receive(16, invisible_duration=1.0, wait=1.0) is not None
               and bool(admin.dead_letters(groups["dead_lettered"])), timeout=30, what="the dead letter")
    dead.shutdown()
    try:
        yield Scenario(topic, msg_id, groups)
    finally:
        filt.shutdown()


def test_each_group_shows_its_state(cluster: Cluster, sdk_admin: AdminClient, viewer: APIClient,
                                    unique: Callable[[str], str]) -> None:
    with four_groups(cluster, sdk_admin, unique) as sc:
        resp = viewer.get(f"/api/v1/messages/{sc.msg_id}/consumption/", {"topic": sc.topic})
        assert resp.status_code == 200, resp.json()
        body = resp.json()
        assert body["message"]["msg_id"] == sc.msg_id
        states = {row["group"]: row for row in body["groups"]}
        assert {g: states[g]["state"] for g in sc.groups.values()} == {g: s for s, g in sc.groups.items()}
        assert set(states) == set(sc.groups.values())  # no other group consumes this topic
        filtered = states[sc.groups["filtered"]]
        assert filtered["online"] and filtered["expression"] == "blue" and "does not match" in filtered["detail"]
        assert states[sc.groups["consumed"]]["committed_offset"] == 1
        assert states[sc.groups["dead_lettered"]]["detail"] == f"in %DLQ%{sc.groups['dead_lettered']}"
    assert viewer.get(f"/api/v1/messages/{'0' * 32}/consumption/", {"topic": sc.topic}).status_code == 404
