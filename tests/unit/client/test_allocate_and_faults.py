from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from broker_core.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueByCircle
from broker_core.client.instance import TopicRoute
from broker_core.client.latency import LatencyFaultTolerance
from broker_core.client.message import MessageQueue

QUEUES = [f"q{i}" for i in range(1, 9)]
CIDS = ["c1", "c2", "c3"]


def test_averagely_matches_the_seeds_example():
    avg = AllocateMessageQueueAveragely()
    assert [avg.allocate(c, QUEUES, CIDS) for c in CIDS] == [
        ["q1", "q2", "q3"], ["q4", "q5", "q6"], ["q7", "q8"]]


def test_by_circle_matches_the_seeds_example():
    circle = AllocateMessageQueueByCircle()
    assert [circle.allocate(c, QUEUES, CIDS) for c in CIDS] == [
        ["q1", "q4", "q7"], ["q2", "q5", "q8"], ["q3", "q6"]]


@given(st.integers(0, 40), st.integers(1, 12), st.sampled_from([AllocateMessageQueueAveragely(),
                                                                AllocateMessageQueueByCircle()]))
def test_every_queue_has_exactly_one_owner(n_mq, n_cid, strategy):
    mqs = [f"q{i:02d}" for i in range(n_mq)]
    cids = [f"c{i:02d}" for i in range(n_cid)]
    shares = [strategy.allocate(c, mqs, cids) for c in cids]
    owned = [q for s in shares for q in s]
    assert sorted(owned) == mqs  # each once, none missing
    assert all(len(s) <= 1 for s in shares) if n_mq <= n_cid else True
    assert strategy.allocate("stranger", mqs, cids) == []


def test_latency_fault_tolerance_table():
    ft = LatencyFaultTolerance()
    ft.update("fast", 40)
    ft.update("slow", 600)  # >= 550 ms: 30 s out
    ft.update("dead", 30000)  # a failure counts as 30 s: >= 15000 -> 600 s out
    assert ft.available("fast") and not ft.available("slow") and not ft.available("dead")
    assert ft.unavailable_until["slow"] - time.monotonic() > 29
    assert ft.unavailable_until["dead"] - time.monotonic() > 599
    assert ft.available("never-seen")


def test_route_from_wire_respects_permissions_and_masters():
    route = TopicRoute.from_wire("T", {
        "queueDatas": [{"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 1, "perm": 6},
                       {"brokerName": "a", "readQueueNums": 1, "writeQueueNums": 1, "perm": 4},
                       {"brokerName": "slave-only", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}],
        "brokerDatas": [{"cluster": "c", "brokerName": "a", "brokerAddrs": {"0": "h:1"}},
                        {"cluster": "c", "brokerName": "b", "brokerAddrs": {"0": "h:2"}},
                        {"cluster": "c", "brokerName": "slave-only", "brokerAddrs": {"1": "h:3"}}]})
    assert route.write_queues == [MessageQueue("T", "b", 0)]
    # a group whose master is gone is still read, from its slave (Java's topicRouteData2TopicSubscribeInfo)
    assert route.read_queues == [MessageQueue("T", "a", 0), MessageQueue("T", "b", 0), MessageQueue("T", "b", 1),
                                 MessageQueue("T", "slave-only", 0)]
