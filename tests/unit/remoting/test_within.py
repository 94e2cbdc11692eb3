"""``loops.within``: a timeout around an await that keeps a cancellation which arrives in the same loop turn as the
awaited result (Python 3.11's ``asyncio.wait_for`` returns the result then, and a loop around it outlives
``task.cancel()``: a slave broker's HA read loop kept it from exiting on SIGTERM)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker_core.remoting.loops import within

Wrap = Callable[[Awaitable[Any], float], Awaitable[Any]]


async def _cancelled_as_the_result_arrives(wrap: Wrap) -> tuple[bool, object]:
    """A task awaiting ``wrap(fut, 10)``; ``fut`` gets its result and the task is cancelled in one turn. Returns
    (whether the task ended cancelled, its result otherwise)."""
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waiter() -> object:
        return await wrap(fut, 10.0)

    task = asyncio.ensure_future(waiter())
    for _ in range(3):  # let it reach its await (wait_for starts an inner task)
        await asyncio.sleep(0)
    fut.set_result(7)
    task.cancel()
    try:
        return False, await task
    except asyncio.CancelledError:
        return True, None


def test_a_cancellation_in_the_same_turn_as_the_result_is_kept() -> None:
    assert asyncio.run(_cancelled_as_the_result_arrives(within)) == (True, None)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's wait_for is built on asyncio.timeout")
def test_the_same_turn_is_where_3_11_wait_for_loses_it() -> None:
    """The control: the scenario above is real (3.11's wait_for returns the result and the task carries on)."""
    assert asyncio.run(_cancelled_as_the_result_arrives(asyncio.wait_for)) == (False, 7)


def test_it_times_out_and_returns_results() -> None:
    async def main() -> None:
        assert await within(asyncio.sleep(0, result="x"), 1.0) == "x"
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(10), 0.01)
        event = asyncio.Event()
        with pytest.raises(TimeoutError):
            await within(event.wait(), 0.01)
    asyncio.run(main())
