"""Work from the client's event loop to a thread pool, and the outcomes back, without one executor task and one
loop wake-up per item (what ``loop.run_in_executor`` costs per message: a concurrent future with its condition
and lock, a submit that may wake a thread, an asyncio future chained to it, and a ``call_soon_threadsafe`` per
completion; measured, that machinery was most of the push consumer's event loop at ~69 us a message).

:class:`Handoff` keeps a queue of items. ``put(item)`` (on the loop) queues it and starts one more drainer on the
pool while fewer than ``workers`` run; each drainer takes items one at a time until the queue is empty, so up to
``workers`` items still run at once (a slow listener keeps every pool thread busy, as before) while a burst of
fast items costs no executor task each. Outcomes (``work(item)``'s return value, or the exception it raised) are
collected and handed to ``done(outcomes)`` on the loop, one wake-up for whatever finished meanwhile, in order of
completion.

Invariants: a queued item runs exactly once while the pool runs (a drainer leaves only when, under the lock, the
queue is empty; ``put`` starts a drainer whenever fewer than ``workers`` run, checked under the same lock after
queueing, so no item waits with no drainer to take it). ``put`` raises RuntimeError once the pool is shut down,
as ``run_in_executor`` did; outcomes finishing after the loop closed are dropped (nobody waits for them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Handoff(Generic[T, R]):
    def __init__(self, pool: concurrent.futures.Executor, workers: int, work: Callable[[T], R],
                 done: Callable[[list[tuple[T, R | Exception]]], None]) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._pool = pool
        self._workers = workers
        self._work = work
        self._done = done
        self._queue: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._active = 0  # drainers started and not yet finished
        self._outcomes: list[tuple[T, R | Exception]] = []
        self._delivery_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def active(self) -> int:
        return self._active

    def put(self, item: T) -> None:
        """Queue ``item`` (on the event loop that is to receive its outcome)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._queue.put(item)
        with self._lock:
            if self._active >= self._workers:
                return
            self._active += 1
        try:
            self._pool.submit(self._drain)
        except RuntimeError:  # the pool is shut down
            with self._lock:
                self._active -= 1
            raise

    def _drain(self) -> None:
        """On a pool thread: run queued items until none is left."""
        take = self._queue.get_nowait
        while True:
            try:
                item = take()
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._active -= 1
                        return
                continue
            try:
                outcome: R | Exception = self._work(item)
            except Exception as exc:  # noqa: BLE001 - any failure is the item's outcome; the drainer goes on
                outcome = exc
            self._report(item, outcome)

    def _report(self, item: T, outcome: R | Exception) -> None:
        with self._lock:
            self._outcomes.append((item, outcome))
            if self._delivery_scheduled:
                return
            self._delivery_scheduled = True
        loop = self._loop
        assert loop is not None  # set by the put that queued the item
        try:
            loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody waits for the outcome
            pass

    def _deliver(self) -> None:
        with self._lock:
            outcomes, self._outcomes = self._outcomes, []
            self._delivery_scheduled = False
        self._done(outcomes)
