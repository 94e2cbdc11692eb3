"""Flush services with their real threads: durability points, group commit and its timeout."""

from __future__ import annotations

import mmap
import time

from broker_core.store import PutStatus, durability
from broker_core.store.message import MessageInner


def _wait(cond, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return False


def test_sync_flush_returns_after_the_data_is_flushed(open_store):
    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    for i in range(50):
        r = store.put_message(MessageInner("S", b"durable-%d" % i))
        assert r.ok
        assert store.commit_log.flushed_where >= r.next_offset


def test_sync_flush_batch_is_one_group_commit(open_store):
    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    results = store.put_messages([MessageInner("S", b"m%d" % i) for i in range(100)])
    assert all(r.ok for r in results)
    assert store.commit_log.flushed_where >= results[-1].next_offset


def test_flush_disk_timeout_when_the_flush_does_not_come(open_store):
    store = open_store(background=True, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=200)
    store.flush_service.shutdown()  # nothing will flush any more
    r = store.put_message(MessageInner("S", b"stuck"))
    assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert r.phy_offset >= 0  # appended (visible after dispatch), just not known to be durable


def test_group_commit_request_future_after_completion_is_resolved_at_once(open_store):
    import asyncio

    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    results, request = store.put_messages_nowait([MessageInner("S", b"cb")])
    assert results[0].ok
    assert request.wait(5.0)

    async def late() -> tuple[bool, bool]:
        fut = request.future()
        return fut.done(), await fut

    assert asyncio.run(late()) == (True, True)


def test_async_flush_catches_up_on_its_interval_and_updates_the_checkpoint(open_store, clock):
    store = open_store(background=True, flush_interval_commit_log_ms=20, flush_commit_log_least_pages=0,
                       flush_interval_consume_queue_ms=20, flush_consume_queue_least_pages=0)
    last = None
    for i in range(200):
        last = store.put_message(MessageInner("A", b"x" * 500, keys=f"k{i}"))
    assert last.ok
    assert _wait(lambda: store.commit_log.flushed_where >= last.next_offset)
    assert _wait(lambda: store.checkpoint.physic_msg_timestamp == clock.now_ms())
    assert _wait(lambda: store.checkpoint.logics_msg_timestamp == clock.now_ms())
    assert _wait(lambda: store.checkpoint.index_msg_timestamp == clock.now_ms())


def test_coroutines_awaiting_one_group_commit_are_woken_together(open_store):
    """64 coroutines await their requests' futures; each commit resolves its futures with one call into the
    loop, and every future says flushed only once the CommitLog is flushed past its record."""
    import asyncio

    from broker_core.store import flush as flush_module

    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    calls = []
    real = flush_module.resolve_futures

    def counting(pending, oks):  # type: ignore[no-untyped-def]
        calls.append(sum(p is not None for p in pending))
        real(pending, oks)

    flush_module.resolve_futures = counting
    try:
        early = []

        async def writer(i: int) -> tuple[bool, int]:
            results, request = store.put_messages_nowait([MessageInner("S", b"a-%d" % i)])
            fut = request.future()
            if fut.done():  # the flush thread committed it before the future was asked for: resolved at once
                early.append(i)
            ok = await fut
            return ok, results[0].next_offset

        async def run() -> list[tuple[bool, int]]:
            return await asyncio.gather(*(writer(i) for i in range(64)))

        outcomes = asyncio.run(run())
    finally:
        flush_module.resolve_futures = real
    assert all(ok for ok, _ in outcomes)
    assert store.commit_log.flushed_where >= max(end for _, end in outcomes)
    assert sum(calls) + len(early) == 64  # every future resolved once: by a commit's one call, or at once
    assert len([c for c in calls if c]) < sum(calls)  # commits served several coroutines each


def test_a_group_commit_syncs_again_only_when_the_first_sync_did_not_reach_its_requests(open_store, monkeypatch):
    """Upstream checks ``flushOK`` before each of its two rounds: bytes another writer appended during the first
    sync are not this commit's to wait for (a second sync of them doubled every commit's time)."""

    store = open_store(background=True, flush_disk_type="SYNC_FLUSH")
    service = store.flush_service
    service.shutdown()  # its thread stops: the test drives do_commit
    results, request = store.put_messages_nowait([MessageInner("S", b"first")])
    segment = store.commit_log.mapped_file_queue.last()
    real, syncs = durability.sync_range, []

    def sync_range(buf: mmap.mmap, start: int, length: int) -> None:
        if buf is segment.mm:  # the ConsumeQueue flusher's syncs are not counted
            syncs.append(length)
            if len(syncs) == 1:  # a writer appends while the first sync runs
                store.put_messages_nowait([MessageInner("S", b"meanwhile")])
        real(buf, start, length)

    monkeypatch.setattr(durability, "sync_range", sync_range)
    service.do_commit()
    assert request.wait(1.0) and results[0].ok
    assert len(syncs) == 1
    assert store.commit_log.flushed_where == results[0].next_offset  # "meanwhile" waits for the next commit
    assert segment.file_from_offset + segment.wrote_position > results[0].next_offset


def test_a_group_commit_whose_batch_ends_in_the_next_segment_syncs_both(open_store):
    store = open_store(background=True, flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log_bytes=4096)
    results = store.put_messages([MessageInner("S", b"x" * 500) for _ in range(12)])  # ~7 KiB over 4 KiB segments
    assert all(r.ok for r in results)
    assert len({r.phy_offset // 4096 for r in results}) >= 2
    assert store.commit_log.flushed_where >= results[-1].next_offset


def test_group_commit_request_latch_waits_and_completions_in_any_order() -> None:
    """The latch is made by the first ``wait`` (a coroutine's request has none): a thread waiting before the
    completion is woken by it, waits after it return at once, a timeout is False, and ``future(loop)`` takes the
    caller's loop."""
    import asyncio
    import threading

    from broker_core.store.flush import GroupCommitRequest, resolve_futures

    early = GroupCommitRequest(10)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(early.wait(5.0)))
    waiter.start()
    time.sleep(0.05)
    assert early.complete(True) is None and early._latch is not None
    waiter.join(5.0)
    assert got == [True] and early.wait(0.0) is True

    late = GroupCommitRequest(20)
    assert late.complete(False) is None and late._latch is None  # nobody waited: no latch was made
    assert late.wait(5.0) is False
    assert GroupCommitRequest(30).wait(0.01) is False  # timed out

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        req = GroupCommitRequest(40)
        fut = req.future(loop)
        resolve_futures([req.complete(True)], [True])
        return await asyncio.wait_for(fut, 5.0)

    assert asyncio.run(main()) is True


def test_consume_queue_flush_visits_only_written_queues_and_flushes_every_one(open_store, monkeypatch):
    """consume_queue.py invariant 5: a pass flushes the queues written since their last flush, all of them,
    and no other; a queue left unflushed (a second file, fewer dirty pages than least_pages) stays marked."""
    from broker_core.store.consume_queue import ConsumeQueue

    store = open_store()  # no service threads: the passes below are the only flushes
    visited: list[tuple[str, int]] = []
    real = ConsumeQueue.flush

    def counting(self, least_pages=0):  # type: ignore[no-untyped-def]
        visited.append((self.topic, self.queue_id))
        return real(self, least_pages)

    monkeypatch.setattr(ConsumeQueue, "flush", counting)

    def put(topic: str, queue_id: int, n: int) -> None:
        for i in range(n):
            msg = MessageInner(topic, b"u%d" % i)
            msg.queue_id = queue_id
            assert store.put_message(msg).ok
        store.reput.do_reput()

    for q in range(12):
        put("Many", q, 3)
    store.flush_cq_service.flush(0)
    assert sorted(visited) == [("Many", q) for q in range(12)]
    assert not any(cq.unflushed() for cq in store.consume_queues())
    visited.clear()
    store.flush_cq_service.flush(0)
    assert visited == []  # nothing written since: no queue walked

    put("Many", 4, 1)
    put("Long", 0, 120)  # 50 units a file: three files, one flushed per call
    passes = 0
    while any(cq.unflushed() for cq in store.consume_queues()):
        visited.clear()
        store.flush_cq_service.flush(0)
        passes += 1
        assert set(visited) <= {("Many", 4), ("Long", 0)} and ("Long", 0) in visited
        assert passes <= 3
    assert passes == 3 and len(store.flush_cq_service.dirty) == 0

    put("Few", 0, 3)  # three units, under two dirty pages: a least_pages pass leaves it marked
    store.flush_cq_service.flush(2)
    few = store.find_consume_queue("Few", 0)
    assert few.unflushed() and few in store.flush_cq_service.dirty._queues
    visited.clear()
    store.flush_cq_service.flush(0)
    assert visited == [("Few", 0)] and not few.unflushed()
