"""Dispatch: CommitLog records to ConsumeQueues and IndexFiles (upstream ReputMessageService, INVENTORY §11).

Invariants:
1. ``reput_from_offset`` only moves forward, record by record, and never past the CommitLog's read
   position; every record below it has been handed to every dispatcher.
2. Dispatch is idempotent: ConsumeQueues skip units they already hold and the index skips offsets it
   already indexed, so replaying a range after a crash is safe.
3. A message is visible to consumers only after dispatch (pulls read ConsumeQueues).
4. The put path hands each appended record's fields over (``CommitLog.pending_dispatch``) so the
   common case does not parse bytes it just wrote. The hand-off is only a hint: an entry is used only
   if its offset is exactly ``reput_from_offset``; otherwise the record is parsed from the CommitLog
   (always the case during recovery replay).

The loop dispatches everything readable in one batch. While appends keep coming it polls every millisecond,
as the seeds do (``Thread.sleep(1)``), so one wake dispatches whatever arrived meanwhile; after 20 quiet polls
it sleeps until the CommitLog reports an append (``CommitLog.appended``) or ``_IDLE_WAIT_S`` passes, so an
idle broker does not wake a thread (and hand the GIL over) a thousand times a second. ``wait_for``
lets callers wait for a given offset.

Driven from an event loop (:meth:`ReputMessageService.drive_from`, what the broker does): an append schedules one
dispatch on the loop (``call_soon``, coalesced until it runs), so it runs on the loop's thread after the callbacks
of that turn, the put's response among them: still off the append, batched per loop turn, and with no second
thread to wake and hand the GIL to. A turn dispatches at most ``_LOOP_BATCHES`` batches and leaves the rest of a
backlog (a slave catching up, records a replay left) to the next turns. Measured with one-at-a-time sends
(``/proc`` per-thread CPU), the thread cost about 30 us of CPU per send in wakes and GIL hand-offs, on top of the
dispatch itself. The thread then only polls every ``_IDLE_WAIT_S`` as a safety net (records appended while the
loop is blocked, or by a path that did not report them).

When nothing waits for arrivals (no held pull, no slave: ``drive_from``'s ``waited_for``), the dispatch of an append
on the loop is deferred by up to ``_LOOP_DEFER_S`` (10 ms; the seeds' reput thread sleeps 1 ms) and batched with the
appends that follow. A client sending one message at a time is usually woken onto the broker's CPU (the kernel's
wake-affine choice for socket wake-ups), so whatever the broker does after writing a send's answer delays the next
send: the dispatch that followed each answer was 10 of a 62 us round trip (``perf`` sched and syscall timeline).
Readers lose nothing: the store's reads dispatch what is appended before they read. Why 10 ms and not the seeds' 1
ms: a dispatch costs the loop about 30 us before its first record (the reput pass, the queue and index calls, the
arrival listeners; measured in process), and at one-at-a-time rates (3-10k sends/s) a 1 ms round dispatched only
3-10 records, so that fixed cost was 3-9 us of every send (broker CPU per send, ``/proc``: 55 -> 49 us user with the
C send lane).

Controller mode (``dispatch_limit``, RocketMQ 5's ``readUnCommitted=false``): records are dispatched only below the
limit the HA side gives, the confirm offset (on a master with ``allAckInSyncStateSet``, what every SyncStateSet
member acknowledged; on a slave, what its master confirmed), so a consumer never reads a message that is not yet
acknowledged, and none that a deposed master's truncation may later remove. ``kick`` dispatches when the limit
rose without an append.

Crash behaviour: nothing is lost; on restart the dispatcher resumes from what the ConsumeQueues and
IndexFiles show as done, or replays from the checkpoint's segment (see ``recovery.py``).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.codec.consume_queue import group_units, take_pending
from broker_core.codec.records import parse_dispatch
from broker_core.store.schedule import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)

# (phy, size, topic, queue_id, queue_offset, tags_code, store_timestamp, keys, uniq_key, sys_flag)
Dispatch = tuple
# Called on the dispatcher thread once per dispatched batch, with the batch's Dispatch tuples
# (long polling wakes the pulls waiting on those queues).
ArrivalListener = Callable[[list[Dispatch]], None]

def _unit_end(unit: tuple[int, int, int, int]) -> int:
    return unit[0] + unit[1]
_BATCH = 1024
# Upper bound of the dispatcher's sleep when nothing was appended (appends wake it at once); also how soon
# stop() is seen and how soon a record appended behind the hand-off (pending_dispatch) is found.
_IDLE_WAIT_S = 0.05
_POLL_S = 0.001  # while appends keep coming: the seeds' Thread.sleep(1)
_POLLS_BEFORE_SLEEP = 20  # quiet polls before sleeping until an append
# Batches (of up to _BATCH records) one loop turn dispatches when driven from an event loop: a backlog is spread
# over turns, so requests are served between them
_LOOP_BATCHES = 2
# How long an append may wait for its dispatch on the loop when nothing waits for arrivals (the seeds' reput thread
# sleeps 1 ms between rounds; the module docstring says why 10 here). Reads that need it dispatch first
# (MessageStore.get_message, get_max_offset_in_queue, query_message: read-your-writes), so only the work waits,
# batched: one-at-a-time sends from a client on the broker's CPU no longer wait behind the previous send's dispatch
# (see the module docstring).
_LOOP_DEFER_S = 0.01


class ReputMessageService:
    def __init__(self, store: StoreParts) -> None:
        self.store = store
        self.commit_log = store.commit_log
        self.reput_from_offset = 0
        self.listeners: list[ArrivalListener] = []
        self.last_dispatched_timestamp = 0
        self._stopped = threading.Event()
        self._dispatched = threading.Condition()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # drive_from
        self._loop_thread: int | None = None  # the thread running _loop, once it has dispatched
        self._waited_for: Callable[[], bool] | None = None  # drive_from
        self._scheduled = False  # a dispatch is due in the loop's next turn (call_soon)
        self._deferred: asyncio.TimerHandle | None = None  # a dispatch is due within _LOOP_DEFER_S (call_later)
        self.dispatch_limit: Callable[[], int] | None = None  # controller mode: dispatch only below it

    # ------------------------------------------------------------------ dispatchers
    def dispatch_batch(self, batch: list[Dispatch]) -> None:
        store = self.store
        cq_table = store.consume_queue_table
        for key, units in group_units(batch).items():
            cq = cq_table.get(key)
            if cq is None:
                cq = store.find_consume_queue(*key)
                cq_table = store.consume_queue_table
            start = 0
            done = cq.max_physic_offset
            if units[0][0] + units[0][1] <= done:  # a replay: skip what the queue already holds
                start = bisect.bisect_right(units, done, key=_unit_end)
            cq.put_units(units, start)
        if store.index_service is not None:
            store.index_service.build_batch(batch)
        self.last_dispatched_timestamp = batch[-1][6]
        for listener in self.listeners:
            listener(batch)

    # ------------------------------------------------------------------ loop
    def end(self) -> int:
        """Where dispatch stops: the CommitLog's end, or the dispatch limit when one is set and lower."""
        end = self.commit_log.max_offset()
        limit = self.dispatch_limit
        return end if limit is None else min(end, limit())

    def kick(self) -> None:
        """The dispatch limit rose (no append reported it): dispatch soon, on the loop or the thread."""
        if self._loop is not None:
            self._soon(now=True)
        else:
            self.commit_log.appended.set()

    def behind(self) -> int:
        return self.commit_log.max_offset() - self.reput_from_offset

    def do_reput(self) -> bool:
        """Dispatch everything readable. True when something was dispatched."""
        return self._reput(-1)[0]

    def _reput(self, budget: int) -> tuple[bool, bool]:
        """(dispatched something, stopped with more readable after ``budget`` batches; negative: no limit)."""
        with self._lock:
            did, left = self._do_reput(budget)
        if did:
            with self._dispatched:
                self._dispatched.notify_all()
        return did, left == 0 and self.reput_from_offset < self.end()

    def _do_reput(self, left: int) -> tuple[bool, int]:
        """Dispatch what is readable, at most ``left`` batches (negative: all); returns (did, batches left)."""
        commit_log = self.commit_log
        pending = commit_log.pending_dispatch
        did = False
        while self.reput_from_offset < self.end() and left != 0:
            offset = self.reput_from_offset
            # Fast path: the put path's hand-off, while it lines up with the CommitLog.
            while pending and pending[0][0] < offset:
                pending.popleft()
            if pending and pending[0][0] == offset:
                batch: list[Dispatch] = []
                limit = self.end()
                while True:
                    offset = take_pending(pending, batch, offset, limit, _BATCH)
                    if not pending or pending[0][0] == offset:
                        break  # drained, at the CommitLog's end, or a full batch
                    # a record that starts a new segment follows the previous segment's blank
                    nxt = commit_log.roll_next_file(offset)
                    if pending[0][0] != nxt:
                        break
                    offset = nxt
                    if len(batch) >= _BATCH:
                        break
                if not batch:  # handed over before the CommitLog's position moved: the next pass takes it
                    break
                self.dispatch_batch(batch)
                self.reput_from_offset = offset
                did = True
                left -= 1
                continue
            moved, left = self._parse_from_commit_log(offset, left)
            if not moved:
                break
            did = True
        return did, left

    def _parse_from_commit_log(self, offset: int, left: int) -> tuple[bool, int]:
        """Dispatch records parsed from the CommitLog segment holding ``offset``, at most ``left`` batches
        (negative: all). (False, left) if none."""
        commit_log = self.commit_log
        result = commit_log.get_data(offset)
        if result is None:
            first = commit_log.min_offset()
            if 0 <= offset < first:
                log.warning("reput offset %d is below the CommitLog min %d; skipping ahead", offset, first)
                self.reput_from_offset = first
                return True, left
            return False, left
        try:
            buf = result.buffer
            limit = len(buf)
            if self.dispatch_limit is not None:
                limit = max(0, min(limit, self.end() - result.start_offset))
            pos = 0
            schedule = self.store.schedule
            delay_ms = schedule.delay_ms if schedule is not None else None
            while pos < limit and left != 0:
                batch, pos, why = parse_dispatch(buf, pos, limit, _BATCH, SCHEDULE_TOPIC, delay_ms)
                if batch:
                    self.dispatch_batch(batch)
                    left -= 1
                if why == "blank":  # the rest of the segment
                    pos = commit_log.roll_next_file(result.start_offset + pos) - result.start_offset
                    break
                if why:
                    self.errors += 1
                    log.error("dispatch stopped at %d: %s", result.start_offset + pos, why)
                    break
            moved = result.start_offset + pos != self.reput_from_offset
            self.reput_from_offset = result.start_offset + pos
            return moved, left
        finally:
            result.release()

    # ------------------------------------------------------------------ driven from an event loop
    def drive_from(self, loop: asyncio.AbstractEventLoop, waited_for: Callable[[], bool] | None = None) -> None:
        """Dispatch on ``loop`` after each append (module docstring) from now on, until :meth:`detach`.
        ``waited_for``: True while something waits for arrivals (held pulls, slaves): appends are dispatched
        in the loop's next turn then; otherwise within ``_LOOP_DEFER_S``, batched. None: always the next turn."""
        self._loop = loop
        self._waited_for = waited_for
        self._loop_thread = None  # learnt on the loop's first dispatch (call_soon_threadsafe until then)
        self.commit_log.after_append = self._soon
        self._soon()  # whatever was appended before

    def detach(self) -> None:
        """Back to the dispatcher thread alone (before the loop stops)."""
        self.commit_log.after_append = None
        self.commit_log.dispatch_armed = False
        self._loop = None
        self._drop_deferred()

    def undefer(self) -> None:
        """Something starts waiting for arrivals (a held pull, a slave; on the loop): a deferred dispatch runs in
        the loop's next turn, and appends from now on tell this dispatcher again, which then sees the waiter.
        While a deferred dispatch is armed appends do not call :meth:`_soon` (``CommitLog.dispatch_armed``), so
        whoever starts to wait must call this."""
        loop = self._loop
        if self._deferred is None or loop is None:
            return
        self._drop_deferred()
        self._scheduled = True
        loop.call_soon(self._on_loop)

    def _soon(self, now: bool = False) -> None:
        """After an append (any thread): one dispatch scheduled on the loop until it runs; deferred by up to
        ``_LOOP_DEFER_S`` when nothing waits for it (``waited_for``) unless ``now``."""
        loop = self._loop
        if self._scheduled or loop is None:
            return
        try:
            # a thread id, not asyncio._get_running_loop(): that one makes a getpid() system call each time
            if threading.get_ident() != self._loop_thread:
                self._scheduled = True
                loop.call_soon_threadsafe(self._on_loop)
                return
            waited_for = self._waited_for
            if now or waited_for is None or waited_for():
                self._scheduled = True
                self._drop_deferred()
                loop.call_soon(self._on_loop)
            elif self._deferred is None:
                self._deferred = loop.call_later(_LOOP_DEFER_S, self._on_loop)
            self.commit_log.dispatch_armed = True  # until _on_loop starts: appends need not call this
        except RuntimeError:  # the loop is closed: the thread's next poll dispatches
            self._scheduled = False

    @property
    def deferred(self) -> bool:
        """A dispatch on the loop is deferred (nothing waited for it): due within ``_LOOP_DEFER_S``."""
        return self._deferred is not None

    def _drop_deferred(self) -> None:
        deferred, self._deferred = self._deferred, None
        if deferred is not None:
            deferred.cancel()

    def _on_loop(self) -> None:
        self._loop_thread = threading.get_ident()
        self._scheduled = False  # before dispatching: an append from here on schedules again
        self.commit_log.dispatch_armed = False
        self._drop_deferred()
        if self._logged_reput(_LOOP_BATCHES):  # a backlog (a slave catching up, a replay): the rest on later
            self._soon(now=True)  # loop turns, between the I/O

    def _logged_reput(self, budget: int) -> bool:
        """``_reput`` for the loop's call and the thread's safety-net poll: an error is counted and logged, never
        raised (the next append or poll tries again). True when more is readable after ``budget`` batches."""
        try:
            return self._reput(budget)[1]
        except Exception:
            self.errors += 1
            log.exception("dispatcher error")
            return False

    def _run(self) -> None:
        commit_log = self.commit_log
        appended = commit_log.appended
        quiet = 0  # polls in a row that found nothing
        while not self._stopped.is_set():
            if self._loop is not None:  # the loop dispatches; this is the safety net
                self._stopped.wait(_IDLE_WAIT_S)
                self._logged_reput(-1)
                continue
            try:
                if quiet >= _POLLS_BEFORE_SLEEP:
                    commit_log.wake_on_append = True  # before looking: an append from now on wakes us
                    appended.clear()
                if self.do_reput():
                    quiet = 0
                    commit_log.wake_on_append = False
                    self._stopped.wait(_POLL_S)
                elif quiet >= _POLLS_BEFORE_SLEEP:
                    appended.wait(_IDLE_WAIT_S)
                else:
                    quiet += 1
                    self._stopped.wait(_POLL_S)
            except Exception:
                self.errors += 1
                log.exception("dispatcher error")
                time.sleep(0.01)

    def wait_for(self, offset: int, timeout: float = 5.0) -> bool:
        """Block until everything below ``offset`` is dispatched (what is readable now is dispatched here)."""
        if self._thread is None or self._loop is not None:
            self.do_reput()
            if self._thread is None or self.reput_from_offset >= offset:
                return self.reput_from_offset >= offset
        deadline = time.monotonic() + timeout
        with self._dispatched:
            while self.reput_from_offset < offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._dispatched.wait(min(left, 0.01))
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reput-message-service", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        if self._thread is not None:
            self.wait_for(self.end(), timeout=5.0)  # catch up first, as upstream does
            self._stopped.set()
            self.commit_log.appended.set()
            self._thread.join()
            self._thread = None
