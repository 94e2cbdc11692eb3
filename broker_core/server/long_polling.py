"""Long polling (upstream ``PullRequestHoldService``): a pull that finds nothing waits until a message
arrives on its queue or its suspend time runs out.

The dispatcher calls :meth:`arrived` once per dispatched batch, only when someone is waiting: on the event
loop (the broker's dispatcher runs there, store/dispatcher.py) the waiters of the touched queues are woken at
once; from another thread (the dispatcher's own, catching up) the queues are handed to the loop with one
``call_soon_threadsafe``.

Cap: a connection holds at most ``maxHeldPullsPerConnection`` requests (pulls and receives together). A
request past the cap is not held: the handler answers it at once as if its wait had run out (PULL_NOT_FOUND),
so a client cannot pin unbounded waiters. :meth:`reserve` takes a slot synchronously, when the request is
dispatched (so a burst of requests in one read is counted), and :meth:`held` runs the wait as a task that
gives the slot back when it ends, however it ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from broker_core.remoting.loops import within
from broker_core.remoting.server import Connection

T = TypeVar("T")


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop, max_held_per_connection: int = 1024) -> None:
        self.loop = loop
        self.waiting: dict[tuple[str, int], set[asyncio.Future[None]]] = defaultdict(set)
        self._count = 0
        self._loop_thread: int | None = None  # the loop's thread (wait_any runs there)
        self.max_held_per_connection = max_held_per_connection
        # called on the loop when a wait starts (the broker's: the dispatcher runs a deferred dispatch now)
        self.on_wait: Callable[[], None] | None = None
        self.refused = 0  # requests answered at once because their connection held the maximum

    def reserve(self, conn: Connection) -> bool:
        """Take one of ``conn``'s hold slots; False (and nothing taken) when it holds the maximum."""
        if conn.held >= self.max_held_per_connection:
            self.refused += 1
            return False
        conn.held += 1
        return True

    def held(self, conn: Connection, wait: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run ``wait`` (a held request, after :meth:`reserve`) as a task that gives the slot back when done."""
        task = asyncio.ensure_future(wait)

        def release(_: asyncio.Future[T]) -> None:
            conn.held -= 1

        task.add_done_callback(release)
        return task

    @property
    def waiting_count(self) -> int:
        """Held waits times the queues each waits on (0: nothing waits for an arrival)."""
        return self._count

    def arrived(self, batch: list[tuple]) -> None:
        """The dispatcher, on any thread."""
        if not self._count:
            return
        keys = {(d[2], d[3]) for d in batch}
        # a thread id, not asyncio._get_running_loop() (a getpid() system call each time); wait_any, on the loop,
        # set it before anything could wait
        if threading.get_ident() == self._loop_thread:
            self._wake(keys)
        else:
            self.loop.call_soon_threadsafe(self._wake, keys)

    def _wake(self, keys: set[tuple[str, int]]) -> None:
        for key in keys:
            for fut in self.waiting.get(key, ()):
                if not fut.done():
                    fut.set_result(None)  # the waiter unregisters itself from every key it waits on

    async def wait(self, topic: str, queue_id: int, timeout: float) -> bool:
        """Wait for an arrival on the queue; False on timeout."""
        return await self.wait_any([(topic, queue_id)], timeout)

    async def wait_any(self, keys: list[tuple[str, int]], timeout: float) -> bool:
        """Wait for an arrival on any of the queues; False on timeout."""
        self._loop_thread = threading.get_ident()
        fut: asyncio.Future[None] = self.loop.create_future()
        for key in keys:
            self.waiting[key].add(fut)
            self._count += 1
        if self.on_wait is not None:
            self.on_wait()
        try:
            await within(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiters = self.waiting.get(key)
                if waiters is not None and fut in waiters:
                    waiters.discard(fut)
                    self._count -= 1
                    if not waiters:
                        del self.waiting[key]

    def wake_all(self) -> None:
        self._wake(set(self.waiting))
