"""Long polling (upstream ``PullRequestHoldService``): a pull that finds nothing waits until a message
arrives on its queue or its suspend time runs out.

The dispatcher thread calls :meth:`arrived` once per dispatched batch; it hands the touched queues to
the event loop with one ``call_soon_threadsafe`` (only when someone is waiting), where the waiters of
those queues are woken to pull again.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: dict[tuple[str, int], set[asyncio.Future[None]]] = defaultdict(set)
        self._count = 0

    def arrived(self, batch: list[tuple]) -> None:
        """Dispatcher thread."""
        if not self._count:
            return
        keys = {(d[2], d[3]) for d in batch}
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
        fut: asyncio.Future[None] = self.loop.create_future()
        for key in keys:
            self.waiting[key].add(fut)
            self._count += 1
        try:
            await asyncio.wait_for(fut, timeout)
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
