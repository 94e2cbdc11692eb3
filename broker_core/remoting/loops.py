"""The event loop the broker, the name server and the SDK run on: uvloop (libuv) when it is installed, else
asyncio's own. ``BROKER_CORE_EVENT_LOOP=asyncio`` forces asyncio's loop (``uvloop`` asks for uvloop and fails
if it is missing).

Measured here: a bare echo round trip is 64 us on asyncio's loop and 37 us on uvloop, but our broker's own
rows (``BROKER_CORE_EVENT_LOOP=asyncio|uvloop python -m bench.broker --no-peers --skip-latency``) moved only
within noise (batched produce 88k vs 95k msg/s, sync 3.6k vs 3.7k, consume 121k vs 115k): the time is in our
Python, not in the loop. Nothing here depends on which loop runs; the tests run on the default.

GIL hand-off (:func:`lower_switch_interval`): CPython gives the GIL to a waiting thread only after the holder has
run ``sys.getswitchinterval()`` (5 ms by default). A broker's dispatcher thread (ConsumeQueue, IndexFile, waking
held pulls) and an SDK's event-loop thread wait for it behind a busy event loop or a busy application thread, so a
message waited up to 5 ms at each hand-off: the tail of end-to-end latency. Every process that runs a loop here
lowers the interval to ``BROKER_CORE_SWITCH_INTERVAL_S`` (0.5 ms; 0 leaves it alone), never raising it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

LOOP_ENV = "BROKER_CORE_EVENT_LOOP"
SWITCH_ENV = "BROKER_CORE_SWITCH_INTERVAL_S"
DEFAULT_SWITCH_INTERVAL_S = 0.0005
T = TypeVar("T")


async def within(aw: Awaitable[T], timeout: float) -> T:
    """``await aw``, raising TimeoutError after ``timeout`` seconds: ``asyncio.wait_for`` without Python 3.11's
    swallowed cancellation. 3.11's ``wait_for`` returns the result when its task is cancelled in the same loop turn
    as the awaited thing completes, so a ``while True`` loop around it can outlive ``task.cancel()`` for ever (seen:
    a slave's HA read loop kept its broker from exiting on SIGTERM). ``asyncio.timeout`` keeps the cancellation."""
    async with asyncio.timeout(timeout):
        return await aw


def lower_switch_interval() -> float:
    """Lower the process's GIL switch interval to ``BROKER_CORE_SWITCH_INTERVAL_S`` (default 0.5 ms) if it is
    higher; returns the interval in force. A value that is not a number >= 0 raises ValueError naming it."""
    raw = os.environ.get(SWITCH_ENV, "").strip()
    try:
        wanted = float(raw) if raw else DEFAULT_SWITCH_INTERVAL_S
    except ValueError:
        raise ValueError(f"{SWITCH_ENV} must be seconds (e.g. 0.0005), not {raw!r}") from None
    if wanted < 0 or wanted != wanted:
        raise ValueError(f"{SWITCH_ENV} must be seconds >= 0, not {raw!r}")
    if 0 < wanted < sys.getswitchinterval():
        sys.setswitchinterval(wanted)
    return sys.getswitchinterval()


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """``uvloop.new_event_loop`` or ``asyncio.new_event_loop``, by :data:`LOOP_ENV` and what is installed."""
    wanted = os.environ.get(LOOP_ENV, "").strip().lower()
    if wanted not in ("", "uvloop", "asyncio"):
        raise ValueError(f"{LOOP_ENV} must be uvloop or asyncio, not {wanted!r}")
    if wanted != "asyncio":
        try:
            import uvloop
        except ImportError:
            if wanted == "uvloop":
                raise
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the selected kind (the SDK's client loop thread; the GIL switch interval is lowered too)."""
    factory = loop_factory()
    lower_switch_interval()
    return factory()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the selected loop (the loop is also made the thread's current loop, as
    ``asyncio.run`` does)."""
    factory = loop_factory()
    lower_switch_interval()
    if factory is asyncio.new_event_loop:
        return asyncio.run(main)
    loop = factory()
    asyncio.set_event_loop(loop)
    try:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(main)
    finally:
        asyncio.set_event_loop(None)
