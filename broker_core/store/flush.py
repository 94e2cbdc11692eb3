"""Flush services (INVENTORY §8): what makes appended bytes durable, and the checkpoint timestamps.

- :class:`FlushRealTimeService` (ASYNC_FLUSH): every ``flushIntervalCommitLog`` ms, flush when at
  least ``flushCommitLogLeastPages`` pages are dirty, and everything every
  ``flushCommitLogThoroughInterval`` ms. A put returns as soon as its bytes are in the page cache.
- :class:`GroupCommitService` (SYNC_FLUSH): writers queue a request for "flushed past my end offset";
  the service flushes once for everything queued and releases the whole batch together (group
  commit). A request not satisfied within ``syncFlushTimeout`` reports ``FLUSH_DISK_TIMEOUT``.
- :class:`FlushConsumeQueueService`: ConsumeQueues, the current IndexFile and the checkpoint.

Flushing is ``os.fdatasync`` on the segment's descriptor: it releases the GIL (``mmap.flush`` does not)
and on Linux writes back the dirty pages of the shared mapping.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore

log = logging.getLogger(__name__)


class _Service:
    name = "service"

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self.run_once()
            except OSError:
                log.exception("%s: flush failed", self.name)
                time.sleep(0.1)

    def run_once(self) -> None:
        raise NotImplementedError

    def wait(self, seconds: float) -> None:
        self._wakeup.wait(seconds)
        self._wakeup.clear()

    def wakeup(self) -> None:
        if not self._wakeup.is_set():
            self._wakeup.set()

    def shutdown(self) -> None:
        self._stopped.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class FlushRealTimeService(_Service):
    name = "flush-commitlog"

    def __init__(self, store: MessageStore) -> None:
        super().__init__()
        cfg = store.config
        self.store = store
        self.interval = cfg.flush_interval_commit_log_ms / 1000
        self.least_pages = cfg.flush_commit_log_least_pages
        self.thorough_ms = cfg.flush_commit_log_thorough_interval_ms
        self.timed = cfg.flush_commit_log_timed
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        least = self.least_pages
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.thorough_ms:
            self._last_thorough = now
            least = 0
        if self.timed:
            time.sleep(self.interval)
        else:
            self.wait(self.interval)
        self.flush(least)

    def flush(self, least_pages: int = 0) -> None:
        commit_log = self.store.commit_log
        commit_log.flush(least_pages)
        mf = commit_log.mapped_file_queue.find_mapped_file_by_offset(max(commit_log.flushed_where - 1, 0))
        if mf is not None and mf.store_timestamp:
            self.store.checkpoint.physic_msg_timestamp = mf.store_timestamp

    def shutdown(self) -> None:
        super().shutdown()
        for _ in range(10):  # flush everything, across segment boundaries
            if not self.store.commit_log.flush(0):
                break


class GroupCommitRequest:
    """A writer's wait for "flushed past ``next_offset``" (upstream ``GroupCommitRequest``).

    ``wait(timeout)`` blocks a thread; ``future()`` serves coroutines (the broker's send handlers). A plain
    lock is the latch: it is the cheapest thing to wake in CPython, which matters with many concurrent
    writers."""

    __slots__ = ("_future", "_guard", "_latch", "next_offset", "ok")

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self.ok: bool | None = None
        self._latch = threading.Lock()
        self._latch.acquire()
        self._future: tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]] | None = None
        self._guard = threading.Lock()

    def wait(self, timeout: float) -> bool:
        """True once flushed; False on timeout or when the service reported failure."""
        if self._latch.acquire(timeout=timeout):
            self._latch.release()
            return bool(self.ok)
        return False

    def future(self) -> asyncio.Future[bool]:
        """For a coroutine on the running loop: a future that resolves to the outcome. The service resolves all
        the futures of one commit with a single call into each loop (one wake-up per commit, not one per
        request: each wake-up from the flush thread hands the GIL to the loop and back)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        with self._guard:
            if self.ok is None:
                self._future = (loop, fut)
                return fut
        fut.set_result(bool(self.ok))
        return fut

    def complete(self, ok: bool) -> tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]] | None:
        """Mark the outcome and wake a waiting thread. A future from :meth:`future` is returned, not resolved,
        so the caller can resolve a whole commit's futures at once (:func:`resolve_futures`)."""
        with self._guard:
            self.ok = ok
            future, self._future = self._future, None
        self._latch.release()
        return future


def _set_results(items: list[tuple[asyncio.Future[bool], bool]]) -> None:
    for fut, ok in items:
        if not fut.done():
            fut.set_result(ok)


def resolve_futures(pending: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]] | None],
                    oks: list[bool]) -> None:
    """Resolve the futures ``complete`` handed back, with one ``call_soon_threadsafe`` per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], bool]]] = {}
    for item, ok in zip(pending, oks, strict=True):
        if item is not None:
            by_loop.setdefault(item[0], []).append((item[1], ok))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_set_results, items)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


class GroupCommitService(_Service):
    name = "group-commit"

    def __init__(self, store: MessageStore) -> None:
        super().__init__()
        self.store = store
        self._lock = threading.Lock()
        self._requests: list[GroupCommitRequest] = []

    def put_request(self, next_offset: int) -> GroupCommitRequest:
        req = GroupCommitRequest(next_offset)
        with self._lock:
            self._requests.append(req)
        self.wakeup()
        return req

    def run_once(self) -> None:
        self.wait(0.01)
        self.do_commit()

    def do_commit(self) -> None:
        with self._lock:
            batch, self._requests = self._requests, []
        commit_log = self.store.commit_log
        if not batch:
            commit_log.flush(0)
            return
        target = max(r.next_offset for r in batch)
        for _ in range(2):  # a batch may end in the next segment
            if commit_log.flushed_where >= target:
                break
            commit_log.flush(0)
        flushed = commit_log.flushed_where
        oks = [flushed >= req.next_offset for req in batch]
        resolve_futures([req.complete(ok) for req, ok in zip(batch, oks, strict=True)], oks)
        mf = commit_log.mapped_file_queue.find_mapped_file_by_offset(max(flushed - 1, 0))
        if mf is not None and mf.store_timestamp:
            self.store.checkpoint.physic_msg_timestamp = mf.store_timestamp

    def shutdown(self) -> None:
        super().shutdown()
        self.do_commit()
        with self._lock:
            leftover, self._requests = self._requests, []
        resolve_futures([req.complete(False) for req in leftover], [False] * len(leftover))


class FlushConsumeQueueService(_Service):
    name = "flush-consumequeue"

    def __init__(self, store: MessageStore) -> None:
        super().__init__()
        cfg = store.config
        self.store = store
        self.interval = cfg.flush_interval_consume_queue_ms / 1000
        self.least_pages = cfg.flush_consume_queue_least_pages
        self.thorough_ms = cfg.flush_consume_queue_thorough_interval_ms
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        self.wait(self.interval)
        least = self.least_pages
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.thorough_ms:
            self._last_thorough = now
            least = 0
        self.flush(least)

    def flush(self, least_pages: int = 0) -> None:
        store = self.store
        logics_ts = store.last_dispatched_timestamp
        for cq in store.consume_queues():
            cq.flush(least_pages)
        if least_pages == 0 and logics_ts:
            store.checkpoint.logics_msg_timestamp = logics_ts
        if store.index_service is not None:
            index_ts = store.index_service.last_update()[0]
            store.index_service.flush()
            if index_ts:
                store.checkpoint.index_msg_timestamp = index_ts
        store.checkpoint.flush()

    def shutdown(self) -> None:
        super().shutdown()
        self.flush(0)
