"""client/consumer/handoff.py: items from the event loop to a pool and their outcomes back. Every item runs once
and its outcome (or exception) comes back on the loop; at most ``workers`` run at once and all of them do when
the work blocks; outcomes that finished while the loop was busy arrive in one delivery (``run_in_executor``
delivered each alone); a shut-down pool refuses at ``put``; a closed loop drops late outcomes quietly."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator

import pytest

from broker_core.client.consumer.handoff import Handoff


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    p = concurrent.futures.ThreadPoolExecutor(8)
    yield p
    p.shutdown(wait=True)


def test_every_item_runs_once_and_its_outcome_comes_back_on_the_loop(
        pool: concurrent.futures.ThreadPoolExecutor) -> None:
    async def main() -> tuple[list[tuple[int, object]], set[int]]:
        loop_thread = threading.get_ident()
        got: list[tuple[int, object]] = []
        threads: set[int] = set()
        finished = asyncio.Event()

        def work(i: int) -> int:
            if i % 7 == 3:
                raise KeyError(i)
            return i * i

        def done(outcomes: list[tuple[int, int | Exception]]) -> None:
            threads.add(threading.get_ident())
            got.extend(outcomes)
            if len(got) == 2000:
                finished.set()

        h: Handoff[int, int] = Handoff(pool, 3, work, done)
        for i in range(2000):
            h.put(i)
            if i % 100 == 0:
                await asyncio.sleep(0)  # let deliveries interleave with puts
        await asyncio.wait_for(finished.wait(), 30)
        assert threads == {loop_thread}
        assert h.active <= 3
        return got, threads

    got, _ = asyncio.run(main())
    assert sorted(i for i, _ in got) == list(range(2000))
    for i, outcome in got:
        if i % 7 == 3:
            assert isinstance(outcome, KeyError) and outcome.args == (i,)
        else:
            assert outcome == i * i


def test_up_to_workers_items_run_at_once(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    """Four items that wait for each other (a barrier of four) on four workers all start; the other two wait for
    a free worker (a fifth drainer would run one beside the four waiting)."""
    barrier = threading.Barrier(4, timeout=30)
    release = threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        if i < 4:
            barrier.wait()  # BrokenBarrierError unless four run at once
            release.wait(30)
        with lock:
            running[0] -= 1
        return i

    async def main() -> list[tuple[int, object]]:
        got: list[tuple[int, object]] = []
        finished = asyncio.Event()

        def done(outcomes: list[tuple[int, int | Exception]]) -> None:
            got.extend(outcomes)
            if len(got) == 6:
                finished.set()

        h: Handoff[int, int] = Handoff(pool, 4, work, done)
        for i in range(6):
            h.put(i)
        assert h.active == 4  # no drainer can have finished: the first four items are held
        release.set()
        await asyncio.wait_for(finished.wait(), 30)
        return got

    got = asyncio.run(main())
    assert sorted(i for i, _ in got) == list(range(6))
    assert all(not isinstance(o, Exception) for _, o in got)
    assert most[0] == 4


def test_outcomes_finished_while_the_loop_was_busy_arrive_in_one_delivery(
        pool: concurrent.futures.ThreadPoolExecutor) -> None:
    all_ran = threading.Event()
    ran = [0]
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            ran[0] += 1
            if ran[0] == 50:
                all_ran.set()
        return i

    async def main() -> list[int]:
        deliveries: list[int] = []
        h: Handoff[int, int] = Handoff(pool, 4, work, lambda outcomes: deliveries.append(len(outcomes)))
        for i in range(50):
            h.put(i)
        assert all_ran.wait(30)  # the loop is blocked here while every item runs
        for _ in range(5):
            await asyncio.sleep(0)
        return deliveries

    assert asyncio.run(main()) == [50]


def test_a_shut_down_pool_refuses_at_put() -> None:
    p = concurrent.futures.ThreadPoolExecutor(2)
    p.shutdown()

    async def main() -> None:
        h: Handoff[int, int] = Handoff(p, 2, lambda i: i, lambda outcomes: None)
        with pytest.raises(RuntimeError):
            h.put(1)
        assert h.active == 0

    asyncio.run(main())


def test_outcomes_after_the_loop_closed_are_dropped_and_the_pool_goes_on(
        pool: concurrent.futures.ThreadPoolExecutor) -> None:
    release = threading.Event()
    finished = threading.Event()

    def work(i: int) -> int:
        release.wait(30)
        if i == 1:
            finished.set()
        return i

    async def main() -> Handoff[int, int]:
        h: Handoff[int, int] = Handoff(pool, 1, work, lambda outcomes: None)
        h.put(0)
        h.put(1)
        return h

    h = asyncio.run(main())  # the loop is closed when this returns
    release.set()
    assert finished.wait(30)  # the drainer went on to item 1 after item 0's outcome found the loop closed
    deadline = threading.Event()
    for _ in range(3000):
        if h.active == 0:
            break
        deadline.wait(0.01)
    assert h.active == 0
