"""Push consumer resource controls on a real broker: flow control by cached bytes (pulls pause while a slow listener
holds large bodies, and resume), batches of consumeMessageBatchMaxSize, consumeTimeout sending a stuck message
back, suspend/resume and unsubscribe."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from broker_core.client import AdminClient, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("consumer-controls"))
    try:
        c.add_broker("broker-a", "messageDelayLevel=100ms 200ms 300ms 400ms\n")
        yield c
    finally:
        c.close()


@pytest.fixture
def topic(admin: AdminClient) -> Callable[[str], str]:
    def make(name: str) -> str:
        admin.create_topic(name, 1, 1)
        return name
    return make


def consumer(cluster: Cluster, group: str, topic: str, listener, **kw) -> PushConsumer:  # type: ignore[no-untyped-def]
    c = PushConsumer(group, cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0, **kw)
    c.subscribe(topic)
    c.register_message_listener(listener)
    return c.start()


def test_flow_control_by_size_pauses_pulls_and_resumes(cluster: Cluster, producer: Producer, topic) -> None:  # type: ignore[no-untyped-def]
    t = topic("BigBodies")
    body = b"x" * (200 * 1024)
    for i in range(24):
        producer.send(Message(t, body + str(i).encode()))
    gate = threading.Event()
    seen: list[int] = []

    def slow(msgs: list[MessageExt]) -> ConsumeStatus:
        gate.wait(60)
        seen.extend(m.queue_offset for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "big-bodies", t, slow, pull_threshold_size_for_queue=1, pull_batch_size=4,
                 consume_thread_max=1)
    try:
        wait_until(lambda: c.flow.times > 0, timeout=30, what="flow control to pause the queue")
        pq = next(p for mq, p in c.process_queues.items() if mq.topic == t)
        cached = (len(pq.msgs), pq.msg_size)
        assert cached[0] < 24  # paused: not everything was pulled
        assert cached[1] <= 1024 * 1024 + 4 * (len(body) + 2)  # at most the threshold plus one pull of 4
        gate.set()
        wait_until(lambda: len(seen) == 24, timeout=60, what="every message after the pause")
        assert sorted(seen) == list(range(24))  # resumed: nothing skipped
    finally:
        gate.set()
        c.shutdown()


def test_batches_of_consume_message_batch_max_size(cluster: Cluster, producer: Producer, topic) -> None:  # type: ignore[no-untyped-def]
    t = topic("Batches")
    for i in range(10):
        producer.send(Message(t, b"b%d" % i))
    sizes: list[int] = []
    bodies: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        with lock:
            sizes.append(len(msgs))
            bodies.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "batches", t, listener, consume_message_batch_max_size=4)
    try:
        wait_until(lambda: len(bodies) == 10, timeout=30, what="all ten messages")
        assert max(sizes) <= 4 and max(sizes) > 1 and sorted(bodies) == sorted(b"b%d" % i for i in range(10))
    finally:
        c.shutdown()


def test_consume_timeout_sends_a_stuck_message_back(cluster: Cluster, producer: Producer, topic) -> None:  # type: ignore[no-untyped-def]
    t = topic("Stuck")
    release = threading.Event()
    calls: list[tuple[bytes, int]] = []

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        m = msgs[0]
        calls.append((m.body, m.reconsume_times))
        if m.body == b"stuck" and m.reconsume_times == 0:
            release.wait(60)  # the first call never returns in time
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "stuck", t, listener, consume_timeout=1.5 / 60)  # 1.5 s
    try:
        producer.send(Message(t, b"stuck"))
        producer.send(Message(t, b"after"))
        wait_until(lambda: (b"stuck", 1) in calls, timeout=60, what="the stuck message back from the retry topic")
        wait_until(lambda: c.consume_service is not None and c.consume_service.expired == 1,  # type: ignore[attr-defined]  # concurrent service
                   timeout=10, what="the expired count")
        pq = next(p for mq, p in c.process_queues.items() if mq.topic == t)
        wait_until(lambda: not pq.msgs, timeout=10, what="the queue to be free")  # the offset moves past it
    finally:
        release.set()
        c.shutdown()


def test_suspend_resume_and_unsubscribe(cluster: Cluster, producer: Producer, topic) -> None:  # type: ignore[no-untyped-def]
    a, b = topic("SuspendA"), topic("SuspendB")
    got: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("suspend", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    c.subscribe(a)
    c.subscribe(b)
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: c.assigned_queues(a) and c.assigned_queues(b), timeout=30, what="both topics assigned")
        c.suspend()
        producer.send(Message(a, b"ends-the-held-pull"))  # a pull held by the broker still answers (as RocketMQ)
        wait_until(lambda: b"ends-the-held-pull" in got, timeout=30, what="the pull in flight to come back")
        producer.send(Message(a, b"while-suspended"))
        time.sleep(2.5)  # absence: a suspended consumer looks again only every second and must not pull
        assert b"while-suspended" not in got
        c.resume()
        wait_until(lambda: b"while-suspended" in got, timeout=30, what="the message after resume")
        c.unsubscribe(b)
        wait_until(lambda: not c.assigned_queues(b), timeout=30, what="topic B's queues dropped")
        producer.send(Message(a, b"still-a"))
        producer.send(Message(b, b"not-b"))
        wait_until(lambda: b"still-a" in got, timeout=30, what="topic A still consumed")
        assert b"not-b" not in got
    finally:
        c.shutdown()


@pytest.mark.parametrize("wait_s", [30.0, 0.0], ids=["await", "no-await"])
def test_shutdown_lets_the_listener_calls_under_way_finish(cluster: Cluster, producer: Producer, admin: AdminClient,
                                                         topic, wait_s: float) -> None:  # type: ignore[no-untyped-def]
    """``await_termination_when_shutdown``: the five messages' calls (one thread: one runs, four wait) are let go
    once shutdown has begun; with a wait they finish before the commit, which covers all five (nothing delivered
    again after a restart); without one (RocketMQ's default) the calls are let go only once every queue is dropped,
    and the commit stays below them."""
    t = topic(f"AwaitStop{int(wait_s)}")
    group = f"await-stop-{int(wait_s)}"
    for i in range(5):
        producer.send(Message(t, b"s%d" % i))
    started, release = threading.Event(), threading.Event()
    done: list[int] = []

    def held(msgs: list[MessageExt]) -> ConsumeStatus:
        started.set()
        release.wait(60)
        done.extend(m.queue_offset for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, group, t, held, consume_thread_max=1, await_termination_when_shutdown=wait_s)
    try:
        wait_until(lambda: started.is_set() and any(mq.topic == t and len(pq.msgs) == 5
                                                    for mq, pq in list(c.process_queues.items())),
                   what="all five pulled, the first call running")
        # with a wait: let the calls go as soon as shutdown begins (it waits for them before dropping the queues);
        # without: only once shutdown has dropped every queue (their outcomes then come too late to count)
        gone = (lambda: not c.running) if wait_s else (lambda: not c.process_queues)
        threading.Thread(target=lambda: (wait_until(gone, what="shutdown to get there"), release.set())).start()
    finally:
        c.shutdown()
        release.set()
    assert sorted(done) == [0, 1, 2, 3, 4]  # every call ran either way (the pool finishes what it started)
    row = admin.consume_stats(group, t)["offsetTable"][0]
    if wait_s:
        assert row["consumerOffset"] == 5
    else:
        assert row["consumerOffset"] < 5, row
