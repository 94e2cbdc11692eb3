"""PullConsumer.pull_ahead against a real broker: the same batches, in the same order, as a loop of ``pull`` from
each answer's ``nextBeginOffset``, whether the requests sent ahead guess right (no filter: a steady stride) or
wrong (a tag filter whose matches are spread unevenly, so the broker moves the offset by varying amounts); more
than 800 messages in one pull (RocketMQ's ``max(16000, maxMsgNums * 20)`` ConsumeQueue bytes examined); and a
consumer that stops early can pull again on the same thread (the answers still in flight are dropped)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, Message, Producer, PullConsumer, PullStatus
from broker_core.client.consumer.base import PullResult
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

N = 2000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("pull-ahead"))
    try:
        c.add_broker("broker-a")
        with AdminClient(c.namesrv) as admin:
            admin.create_topic("Ahead", 1, 1)
        producer = Producer("ahead-producer", c.namesrv).start()
        try:
            for start in range(0, N, 100):
                producer.send_batch([Message("Ahead", str(i).encode(), tags="a" if i % 3 == 0 or i % 7 == 0 else "b")
                                     for i in range(start, start + 100)])
        finally:
            producer.shutdown()
        yield c
    finally:
        c.close()


def _key(r: PullResult) -> tuple[object, ...]:
    return r.status, r.next_begin_offset, [(m.queue_offset, m.body) for m in r.messages]


def _by_pull(pc: PullConsumer, expression: str, max_nums: int) -> list[tuple[object, ...]]:
    mq = pc.fetch_queues("Ahead")[0]
    out, offset = [], 0
    while True:
        r = pc.pull(mq, offset, max_nums, expression)
        out.append(_key(r))
        if r.next_begin_offset == offset:
            return out
        offset = r.next_begin_offset


def _by_pull_ahead(pc: PullConsumer, expression: str, max_nums: int, in_flight: int) -> list[tuple[object, ...]]:
    mq = pc.fetch_queues("Ahead")[0]
    out = []
    for r in pc.pull_ahead(mq, 0, max_nums, expression, in_flight=in_flight):
        out.append(_key(r))
        if r.status is PullStatus.NO_NEW_MSG:
            return out
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("expression", "max_nums", "in_flight"),
                         [("*", 32, 2), ("*", 1024, 3), ("a", 16, 3), ("a || b", 50, 4), ("a", 7, 1)])
def test_pull_ahead_gives_what_a_loop_of_pulls_gives(cluster: Cluster, expression: str, max_nums: int,
                                                      in_flight: int) -> None:
    pc = PullConsumer("ahead-group", cluster.namesrv).start()
    try:
        want = _by_pull(pc, expression, max_nums)
        got = _by_pull_ahead(pc, expression, max_nums, in_flight)
        assert got == want
        assert sum(len(k[2]) for k in got) == (N if expression != "a" else sum(  # type: ignore[arg-type]
            1 for i in range(N) if i % 3 == 0 or i % 7 == 0))
        if max_nums == 1024:
            assert len(got[0][2]) == 1024  # type: ignore[arg-type]  # not cut at 800 units
    finally:
        pc.shutdown()


def test_stopping_early_leaves_the_thread_able_to_pull(cluster: Cluster) -> None:
    pc = PullConsumer("ahead-group", cluster.namesrv).start()
    try:
        mq = pc.fetch_queues("Ahead")[0]
        stream = pc.pull_ahead(mq, 0, 10, in_flight=4)
        first = list(itertools.islice(stream, 2))
        stream.close()  # two or more answers still in flight
        assert [m.queue_offset for r in first for m in r.messages] == list(range(20))
        again = pc.pull(mq, 500, 5)
        assert [m.queue_offset for m in again.messages] == list(range(500, 505))
        assert [m.body for m in again.messages] == [str(i).encode() for i in range(500, 505)]
    finally:
        pc.shutdown()
