"""Cutting the CommitLog and everything derived from it back to an offset (controller mode, reference
``rocketmq-controller.md`` §4.3 ``truncateFiles``): a returning slave or deposed master drops the bytes its new
master does not hold.

:func:`truncate_files` (called through ``MessageStore.truncate_files``):

1. ``point >= max offset``: nothing to do (True).
2. ``point`` must be the start of a record or the CommitLog's end (a message boundary); otherwise nothing
   changes and it returns False.
3. Under the dispatcher's lock and the put lock: the segment holding ``point`` keeps its prefix and its bytes
   from ``point`` to the old write position are zeroed; later segments are deleted. ConsumeQueue units whose
   record ends past ``point`` go (their files' tails zeroed as well), the IndexFile resumes indexing at
   ``point``, the dispatcher's offset becomes ``min(old, point)``, and each queue's next offset is taken
   from its ConsumeQueue again.

Invariants: after it returns, ``max_phy_offset() == point``, no ConsumeQueue unit points at or past ``point``,
and no byte of a cut record is left where recovery could read it.

Crash behaviour: the zeroing goes through the page cache (as every CommitLog write), so a process crash after
the call keeps the cut; a crash in the middle leaves a prefix of the old tail zeroed, and recovery stops at the
first zero or torn record, which is at or before the old end, never past a byte of the new master's. The caller
truncates the epoch file only after this returns, so after a crash the next handshake computes the same point
again and cuts again (idempotent). A power loss before the kernel writes the zeros back could bring the old
tail back; the next handshake then cuts it again before any transfer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_core.codec.message import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, SIZE_MAGIC

if TYPE_CHECKING:
    from broker_core.store.mapped_file_queue import MappedFileQueue
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)


def on_record_boundary(store: StoreParts, point: int) -> bool:
    """``point`` is where a record (or a segment's closing blank) starts, or the CommitLog's end."""
    cl = store.commit_log
    if point == cl.max_offset() or point == cl.min_offset() or point % cl.mapped_file_size == 0:
        return True
    mf = cl.mapped_file_queue.find_mapped_file_by_offset(point)
    if mf is None:
        return False
    pos = point - mf.file_from_offset
    if pos + 8 > mf.wrote_position:
        return False
    size, magic = SIZE_MAGIC.unpack_from(mf.mv, pos)
    return size > 0 and magic in (MESSAGE_MAGIC_CODE, BLANK_MAGIC_CODE)


def _cut_queue(mfq: MappedFileQueue, offset: int, now_ms: int) -> None:
    """Zero the bytes of ``mfq`` from ``offset`` to each file's write position, then cut there."""
    size = mfq.mapped_file_size
    for mf in mfq.files:
        start = mf.file_from_offset
        if start + size <= offset:
            continue
        pos = max(0, offset - start)
        end = mf.wrote_position
        if end > pos:
            if mf.staged:
                mf.unstage()
            mf.mv[pos:end] = bytes(end - pos)
    mfq.truncate_dirty_files(offset, now_ms)


def truncate_files(store: StoreParts, point: int) -> bool:
    """Cut the store at ``point`` (module docstring); False (nothing changed) when it is not on a boundary."""
    cl = store.commit_log
    if point >= cl.max_offset():
        return True
    if not on_record_boundary(store, point):
        log.error("cannot truncate the CommitLog at %d: not a message boundary", point)
        return False
    from broker_core.store import recovery

    reput = store.reput
    with reput._lock, cl.put_lock:
        old_end = cl.max_offset()
        now = store.clock.now_ms()
        _cut_queue(cl.mapped_file_queue, point, now)
        cl.mapped_file_queue.flushed_where = min(cl.mapped_file_queue.flushed_where, point)
        cl.pending_dispatch.clear()
        for cq in store.consume_queues():
            if cq.max_physic_offset > point:
                before = [(mf, mf.wrote_position) for mf in cq.mapped_file_queue.files]
                cq.truncate_dirty_logic_files(point)
                for mf, old in before:  # the cut units' bytes too, so a restart's recovery cannot read them
                    if mf in cq.mapped_file_queue.files and old > mf.wrote_position:
                        mf.mv[mf.wrote_position:old] = bytes(old - mf.wrote_position)
        index = store.index_service
        if index is not None and index.last_indexed_phy >= point:
            index.last_indexed_phy = point - 1
        reput.reput_from_offset = min(reput.reput_from_offset, point)
        recovery.recover_topic_queue_table(store)
        cl.stage_last()
    log.warning("CommitLog truncated from %d to %d (controller mode: bytes the new master does not hold)",
                old_end, point)
    return True
