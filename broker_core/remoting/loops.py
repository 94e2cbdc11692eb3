"""The event loop the broker, the name server and the SDK run on: uvloop (libuv) when it is installed, else
asyncio's own. ``BROKER_CORE_EVENT_LOOP=asyncio`` forces asyncio's loop (``uvloop`` asks for uvloop and fails
if it is missing).

Measured here: a bare echo round trip is 64 us on asyncio's loop and 37 us on uvloop, but our broker's own
rows (``BROKER_CORE_EVENT_LOOP=asyncio|uvloop python -m bench.broker --no-peers --skip-latency``) moved only
within noise (batched produce 88k vs 95k msg/s, sync 3.6k vs 3.7k, consume 121k vs 115k): the time is in our
Python, not in the loop. Nothing here depends on which loop runs; the tests run on the default.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

LOOP_ENV = "BROKER_CORE_EVENT_LOOP"
T = TypeVar("T")


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
    return loop_factory()()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the selected loop (the loop is also made the thread's current loop, as
    ``asyncio.run`` does)."""
    factory = loop_factory()
    if factory is asyncio.new_event_loop:
        return asyncio.run(main)
    loop = factory()
    asyncio.set_event_loop(loop)
    try:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(main)
    finally:
        asyncio.set_event_loop(None)
