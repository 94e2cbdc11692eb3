"""Flush services (INVENTORY §8): what makes appended bytes durable, and the checkpoint timestamps.

- :class:`FlushRealTimeService` (ASYNC_FLUSH): every ``flushIntervalCommitLog`` ms, flush when at
  least ``flushCommitLogLeastPages`` pages are dirty, and everything every
  ``flushCommitLogThoroughInterval`` ms. A put returns as soon as its bytes are in the page cache.
- :class:`GroupCommitService` (SYNC_FLUSH): writers queue a request for "flushed past my end offset";
  the service flushes once for everything queued and releases the whole batch together (group
  commit). A request not satisfied within ``syncFlushTimeout`` reports ``FLUSH_DISK_TIMEOUT``.
- :class:`FlushConsumeQueueService`: ConsumeQueues, the current IndexFile and the checkpoint. A pass flushes
  only the queues written since their last flush (``consume_queue.py`` invariant 5), so its cost follows the
  queues being written, not the queues that exist; what it syncs and when is unchanged (a queue it skips has
  nothing a flush would sync).

Flushing is ``MappedFile.flush``: ``msync(MS_SYNC)`` of the segment's written range (``pages.sync_range``; the C
twin releases the GIL), which writes back and waits for that range of the file with a device cache flush, as
``fdatasync`` does for the whole file. Not the whole file: the pages prefaulted past the write position
(``prefault.py``) would be written as zeros and cleaned, and the writer's next store to each would fault again.

Invariants:
1. The checkpoint only ever records flushed times: the CommitLog's is the store time of a record below the
   flushed offset (``CommitLog.flushed_timestamp``), the ConsumeQueues' the dispatch time read before the
   queues were flushed, the index's the newest entry's time read before the index was flushed.
2. A failed sync (``OSError``, e.g. EIO) is not retried and never counted: the flushed offset does not
   move past it, the SYNC_FLUSH writers waiting for it are released with a failure (``FLUSH_DISK_FAILED``,
   never success), the store's :class:`~broker_core.store.durability.FlushFailure` latch is set, so every later
   put is refused with ``FLUSH_DISK_FAILED`` and a remark naming the failure, and from then on no flush of any
   kind runs and the checkpoint is never written again. Only a restart clears it: the ``abort`` file stays, so
   recovery verifies the CommitLog from the last checkpoint written before the failure.

Crash behaviour: a put acknowledged under SYNC_FLUSH was flushed (survives power loss); under ASYNC_FLUSH
a put survives a killed process (page cache) but a power loss can take what the last flush did not cover.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING

from broker_core.store.consume_queue import dirty_queues

if TYPE_CHECKING:
    from broker_core.config import FlushConfig
    from broker_core.store.ports import StoreParts

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
            self.run_once()

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

    def __init__(self, store: StoreParts, cfg: FlushConfig) -> None:
        super().__init__()
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
        flush_commit_log(self.store, least_pages, rounds=1)

    def shutdown(self) -> None:
        super().shutdown()
        flush_commit_log(self.store, 0, rounds=10)  # everything, across segment boundaries


def flush_commit_log(store: StoreParts, least_pages: int, rounds: int) -> bool:
    """Up to ``rounds`` CommitLog flushes (one segment each), then the checkpoint's CommitLog time from what was
    flushed. False, with the store's failure latch set, when a sync failed (invariant 2)."""
    failure = store.flush_failure
    if failure.failed:
        return False
    commit_log = store.commit_log
    try:
        for _ in range(rounds):
            if not commit_log.flush(least_pages):
                break
    except OSError as exc:
        failure.record("the CommitLog", exc)
        return False
    if commit_log.flushed_timestamp:
        store.checkpoint.physic_msg_timestamp = commit_log.flushed_timestamp
    return True


class GroupCommitRequest:
    """A writer's wait for "flushed past ``next_offset``" (upstream ``GroupCommitRequest``).

    ``wait(timeout)`` blocks a thread; ``future()`` serves coroutines (the broker's send handlers). A plain
    lock is the latch: it is the cheapest thing to wake in CPython, which matters with many concurrent
    writers. It is made by the first ``wait`` (a coroutine's request never needs one)."""

    __slots__ = ("_future", "_guard", "_latch", "error", "next_offset", "ok")

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self.ok: bool | None = None
        self.error = ""  # set before completion when a failed flush (not a timeout) is the reason
        self._latch: threading.Lock | None = None  # held until completion, once a thread waits
        self._future: tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]] | None = None
        self._guard = threading.Lock()

    def wait(self, timeout: float) -> bool:
        """True once flushed; False on timeout or when the service reported failure."""
        with self._guard:
            if self.ok is not None:
                return self.ok
            latch = self._latch
            if latch is None:
                latch = self._latch = threading.Lock()
                latch.acquire()
        if latch.acquire(timeout=timeout):
            latch.release()
            return bool(self.ok)
        return False

    def future(self, loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[bool]:
        """For a coroutine on the running loop (``loop``, when the caller has it: asking for it costs a system
        call): a future that resolves to the outcome. The service resolves all the futures of one commit with a
        single call into each loop (one wake-up per commit, not one per request: each wake-up from the flush
        thread hands the GIL to the loop and back)."""
        if loop is None:
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
            latch = self._latch
        if latch is not None:
            latch.release()
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

    def __init__(self, store: StoreParts) -> None:
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
        store = self.store
        commit_log = store.commit_log
        if not batch:
            flush_commit_log(store, 0, rounds=1)
            return
        target = max(r.next_offset for r in batch)
        # a batch may end in the next segment: a second round only when the first did not reach it (upstream
        # checks flushOK before each of its two rounds; a second sync of bytes appended meanwhile would double
        # the commit's time)
        for _ in range(2):
            if commit_log.flushed_where >= target or not flush_commit_log(store, 0, rounds=1):
                break
        flushed = commit_log.flushed_where
        oks = [flushed >= req.next_offset for req in batch]
        error = store.flush_failure.error
        for req, ok in zip(batch, oks, strict=True):
            if not ok:
                req.error = error
        resolve_futures([req.complete(ok) for req, ok in zip(batch, oks, strict=True)], oks)

    def shutdown(self) -> None:
        super().shutdown()
        self.do_commit()
        with self._lock:
            leftover, self._requests = self._requests, []
        resolve_futures([req.complete(False) for req in leftover], [False] * len(leftover))


class FlushConsumeQueueService(_Service):
    name = "flush-consumequeue"

    def __init__(self, store: StoreParts, cfg: FlushConfig) -> None:
        super().__init__()
        self.store = store
        self.interval = cfg.flush_interval_consume_queue_ms / 1000
        self.least_pages = cfg.flush_consume_queue_least_pages
        self.thorough_ms = cfg.flush_consume_queue_thorough_interval_ms
        self._last_thorough = time.monotonic()
        self.dirty = dirty_queues(store.store_config.consume_queue_dir)

    def run_once(self) -> None:
        self.wait(self.interval)
        least = self.least_pages
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.thorough_ms:
            self._last_thorough = now
            least = 0
        self.flush(least)

    def flush(self, least_pages: int = 0) -> None:
        """ConsumeQueues, the current IndexFile, then the checkpoint; each time is read before what it covers is
        flushed (invariant 1). A failed sync sets the latch and writes no checkpoint (invariant 2)."""
        store = self.store
        failure = store.flush_failure
        if failure.failed:
            return
        what = "a ConsumeQueue"
        try:
            logics_ts = store.last_dispatched_timestamp
            dirty = self.dirty
            for cq in dirty.take():  # only the queues written since their last flush (consume_queue.py inv. 5)
                cq.flush(least_pages)
                if cq.unflushed():
                    dirty.mark(cq)
            if least_pages == 0 and logics_ts:
                store.checkpoint.logics_msg_timestamp = logics_ts
            if store.index_service is not None:
                what = "an IndexFile"
                index_ts = store.index_service.last_update()[0]
                store.index_service.flush()
                if index_ts:
                    store.checkpoint.index_msg_timestamp = index_ts
            what = "the checkpoint"
            if not failure.failed:  # the CommitLog flusher may have failed meanwhile
                store.checkpoint.flush()
        except OSError as exc:
            failure.record(what, exc)

    def shutdown(self) -> None:
        super().shutdown()
        self.flush(0)
