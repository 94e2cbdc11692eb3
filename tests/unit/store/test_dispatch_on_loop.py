"""The dispatcher driven from an event loop (``ReputMessageService.drive_from``, what the broker does): an append
is dispatched on the loop's thread, also when it came from another thread; a loop that cannot run leaves it to the
dispatcher thread's safety-net poll; ``detach`` hands dispatch back to the thread. Long polling wakes waiters at
once when the dispatch runs on its loop (``PullRequestHoldService.arrived``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

from broker_core.server.long_polling import PullRequestHoldService
from broker_core.store.message import MessageInner
from broker_core.store.message_store import MessageStore


def _on_a_new_loop(main: Callable[[asyncio.AbstractEventLoop], Awaitable[None]]) -> None:
    """Run ``main(loop)`` to completion on a new event loop, then close it."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main(loop))
    finally:
        loop.close()


def _recorder(store: MessageStore) -> list[tuple[int, list[str]]]:
    """(thread ident, topics) of each dispatched batch."""
    seen: list[tuple[int, list[str]]] = []
    store.add_arrival_listener(lambda batch: seen.append((threading.get_ident(), [d[2] for d in batch])))
    return seen


def _dispatched(store: MessageStore) -> bool:
    """Everything appended is dispatched (read without dispatching: the queue reads would dispatch here)."""
    return store.reput.reput_from_offset >= store.commit_log.max_offset()


def _wait_dispatched(store: MessageStore, timeout: float = 5.0) -> None:
    """Wait for the dispatcher without dispatching here (store.dispatch and the queue reads would do it)."""
    deadline = time.monotonic() + timeout
    while not _dispatched(store):
        assert time.monotonic() < deadline, "nothing dispatched what was appended"
        time.sleep(0.002)


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


def test_an_append_is_dispatched_on_the_loop_thread(open_store):
    store = open_store(background=True)
    seen = _recorder(store)

    async def main(loop: asyncio.AbstractEventLoop) -> None:
        store.reput.drive_from(loop)
        assert store.put_message(MessageInner("OnLoop", b"a")).ok
        await _until(lambda: _dispatched(store))
        # appended from another thread: still dispatched here
        assert (await loop.run_in_executor(None, store.put_message, MessageInner("FromThread", b"b"))).ok
        await _until(lambda: _dispatched(store))
        store.reput.detach()

    _on_a_new_loop(main)
    assert store.get_max_offset_in_queue("OnLoop", 0) == store.get_max_offset_in_queue("FromThread", 0) == 1
    me = threading.get_ident()
    assert [topics for _, topics in seen] == [["OnLoop"], ["FromThread"]]
    assert {ident for ident, _ in seen} == {me}  # the loop's thread, not the dispatcher's


def test_detach_hands_dispatch_back_to_the_thread(open_store):
    store = open_store(background=True)
    seen = _recorder(store)

    async def attach_and_detach(loop: asyncio.AbstractEventLoop) -> None:
        store.reput.drive_from(loop)
        store.reput.detach()

    _on_a_new_loop(attach_and_detach)
    assert store.put_message(MessageInner("Back", b"c")).ok
    _wait_dispatched(store)
    assert seen and seen[-1][1] == ["Back"] and seen[-1][0] != threading.get_ident()


def test_the_thread_dispatches_what_a_blocked_loop_cannot(open_store):
    store = open_store(background=True)
    seen = _recorder(store)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.sleep(0))
        store.reput.drive_from(loop)  # attached, but the loop is not running: its call never runs
        assert store.put_message(MessageInner("Stuck", b"d")).ok
        _wait_dispatched(store)
        assert seen[-1][1] == ["Stuck"] and seen[-1][0] != threading.get_ident()
        store.reput.detach()
    finally:
        loop.close()


def test_store_dispatch_on_the_loop_thread_dispatches_there(open_store):
    """``MessageStore.dispatch`` called on the loop's own thread (it cannot yield to the loop) dispatches there,
    rather than waiting for the dispatcher thread's safety-net poll."""
    store = open_store(background=True)
    seen = _recorder(store)

    async def main(loop: asyncio.AbstractEventLoop) -> None:
        store.reput.drive_from(loop)
        assert store.put_message(MessageInner("Inline", b"e")).ok
        assert store.dispatch(timeout=5)
        store.reput.detach()

    _on_a_new_loop(main)
    assert store.get_max_offset_in_queue("Inline", 0) == 1
    assert seen == [(threading.get_ident(), ["Inline"])]


def _arrival(topic: str, queue_id: int) -> tuple:
    return (0, 100, topic, queue_id, 0, 0, 0, "", "", 0)


def test_an_arrival_on_the_loop_wakes_held_pulls_at_once():
    async def main(loop: asyncio.AbstractEventLoop) -> None:
        hold = PullRequestHoldService(loop)
        task = asyncio.ensure_future(hold.wait("T", 1, 5.0))
        await asyncio.sleep(0)  # the waiter registers
        (fut,) = hold.waiting[("T", 1)]
        hold.arrived([_arrival("T", 1)])
        assert fut.done()  # woken in the call, not by a callback queued for later
        assert await task is True

    _on_a_new_loop(main)


def test_an_arrival_from_another_thread_is_handed_to_the_loop():
    async def main(loop: asyncio.AbstractEventLoop) -> None:
        hold = PullRequestHoldService(loop)
        task = asyncio.ensure_future(hold.wait("T", 2, 5.0))
        await asyncio.sleep(0)
        (fut,) = hold.waiting[("T", 2)]
        other = threading.Thread(target=hold.arrived, args=([_arrival("T", 2)],))
        other.start()
        other.join()
        assert not fut.done()  # set on the loop, never from the other thread
        assert await asyncio.wait_for(task, 5.0) is True

    _on_a_new_loop(main)


def test_a_backlog_is_spread_over_loop_turns(open_store):
    """At most _LOOP_BATCHES batches a turn: callbacks queued meanwhile run between the turns' dispatches."""
    store = open_store()  # no dispatcher thread: only the loop dispatches
    events: list[object] = []
    store.add_arrival_listener(lambda batch: events.append(len(batch)))

    async def main(loop: asyncio.AbstractEventLoop) -> None:
        store.reput.drive_from(loop)
        results = store.put_messages([MessageInner("Backlog", b"m%d" % i) for i in range(3000)])
        assert all(r.ok for r in results)
        loop.call_soon(events.append, "other work")  # queued behind the dispatch the puts scheduled
        await _until(lambda: _dispatched(store))
        store.reput.detach()

    _on_a_new_loop(main)
    assert events == [1024, 1024, "other work", 952]
    assert store.get_max_offset_in_queue("Backlog", 0) == 3000


def test_with_nothing_waiting_the_dispatch_is_deferred_and_batched(open_store):
    """drive_from's ``waited_for`` False: an append on the loop is dispatched within _LOOP_DEFER_S, with the appends
    that follow it, not in the next turn; a read dispatches first (read-your-writes); while a dispatch is armed,
    appends do not call the dispatcher (``CommitLog.dispatch_armed``); once something waits and says so
    (``undefer``), the deferred dispatch is brought forward and the next append is dispatched in the next turn."""
    store = open_store()  # no dispatcher thread: only the loop dispatches
    seen = _recorder(store)
    waiting = [False]

    async def main(loop: asyncio.AbstractEventLoop) -> None:
        store.reput.drive_from(loop, lambda: waiting[0])
        await asyncio.sleep(0)  # the first dispatch runs: the loop's thread is known from here on
        assert store.put_message(MessageInner("Lazy", b"a")).ok
        assert store.put_message(MessageInner("Lazy", b"b")).ok
        assert store.reput.deferred and not _dispatched(store)  # no loop turn has run since: deterministic
        await _until(lambda: _dispatched(store))  # the timer: both appends in one batch
        assert [topics for _, topics in seen] == [["Lazy", "Lazy"]]
        assert not store.reput.deferred

        assert store.put_message(MessageInner("Lazy", b"c")).ok
        assert store.reput.deferred
        assert store.get_max_offset_in_queue("Lazy", 0) == 3  # the read dispatched what was appended
        assert _dispatched(store)

        assert store.put_message(MessageInner("Lazy", b"d")).ok  # deferred ...
        assert store.commit_log.dispatch_armed
        asked = []
        store.commit_log.after_append = lambda: asked.append(1)
        assert store.put_message(MessageInner("Lazy", b"d2")).ok  # armed: the dispatcher is not called
        assert asked == [] and store.reput.deferred
        store.commit_log.after_append = store.reput._soon
        waiting[0] = True
        store.reput.undefer()  # ... until something waits and says so: the deferred dispatch in the next turn
        assert not store.reput.deferred and store.commit_log.dispatch_armed
        await asyncio.sleep(0)
        assert _dispatched(store) and not store.commit_log.dispatch_armed
        assert [topics for _, topics in seen][-1] == ["Lazy", "Lazy"]
        assert store.put_message(MessageInner("Lazy", b"e")).ok  # something waits: the next turn, not deferred
        assert not store.reput.deferred and store.commit_log.dispatch_armed
        await asyncio.sleep(0)
        assert _dispatched(store) and [topics for _, topics in seen][-1] == ["Lazy"]
        store.reput.detach()

    _on_a_new_loop(main)
    assert store.get_max_offset_in_queue("Lazy", 0) == 6


def test_the_broker_defers_only_while_nothing_waits(open_store):
    """The broker's ``waited_for``: a held pull (PullRequestHoldService.waiting_count) makes appends dispatch in the
    next turn, and its waiter is woken there."""
    store = open_store()

    async def main(loop: asyncio.AbstractEventLoop) -> None:
        hold = PullRequestHoldService(loop)
        hold.on_wait = store.reput.undefer  # as the broker wires it
        store.add_arrival_listener(hold.arrived)
        store.reput.drive_from(loop, lambda: hold.waiting_count > 0)
        await asyncio.sleep(0)
        assert store.put_message(MessageInner("Held", b"x")).ok
        assert store.reput.deferred  # nobody waits
        assert store.get_max_offset_in_queue("Held", 0) == 1
        task = asyncio.ensure_future(hold.wait("Held", 0, 5.0))
        await asyncio.sleep(0)  # the waiter registers
        assert hold.waiting_count == 1
        assert store.put_message(MessageInner("Held", b"y")).ok
        assert not store.reput.deferred
        assert await asyncio.wait_for(task, 5.0) is True
        store.reput.detach()

    _on_a_new_loop(main)
