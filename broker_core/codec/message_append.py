"""Store messages as CommitLog records (layout in :mod:`broker_core.codec.message`): the loop of the store's put
(``CommitLog.put_messages``), run under its put lock, one call per segment.

:func:`append_messages` writes ``msgs[start:end]`` from ``pos`` of a segment buffer and stops at the first
message it does not write, returning where it stopped. A message is not written (the caller decides) when:

- it is refused: ``limits_error`` is set, its body is over ``max_body``, or its record cannot fit any segment
  (``total + END_FILE_MIN_BLANK_LENGTH > file_size``): the caller answers it with the store's check;
- its record does not fit what is left of this segment: the caller ends the segment with a blank and goes on in
  the next one.

The C twin (``_native.append_messages``) also stops, without writing, at a message it cannot take as is (a body
or host that is not ``bytes``, a number outside its record field): the caller runs this pure function for that one
message, which packs exactly what it always did (or raises ``struct.error`` as the struct packing does).

For each record written: its queue offset comes from ``table[(topic, queue_id)]`` (0 when absent), which moves
on by one unless the record is a prepared or rolled-back transaction message (those take no queue slot); the
dispatcher's tuple ``(phy, size, topic, queue_id, queue_offset, tags_code, store_ts, keys, uniq_key, sys_flag)``
goes to ``pending_append``; and ``results[i]`` becomes ``result_cls(ok, phy, size, queue_offset, store_ts,
store_host, store_port)``. ``tags_code`` is the TAGS hash (Java ``String.hashCode``), or for a message moved to
the schedule topic (``delay_ms`` set) its delivery time ``store_ts + delay_ms``.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from broker_core.codec.hashing import tag_hash
from broker_core.codec.message import (
    END_FILE_MIN_BLANK_LENGTH,
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from broker_core.codec.native import NATIVE

_NO_QUEUE_ADVANCE = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def append_messages(buf: Any, pos: int, file_size: int, base: int, msgs: Sequence[Any], start: int, end: int,
                    max_body: int, store_ts: int, store_host: bytes, store_port: int,
                    table: dict[tuple[str, int], int], pending_append: Callable[[tuple[Any, ...]], Any],
                    results: list[Any], ok: Any, result_cls: Callable[..., Any], progress: list[int]
                    ) -> tuple[int, int]:
    """Write ``msgs[start:end]`` as records from ``pos``; ``(pos, i)`` after the last one written (``i == end``
    when all were). See the module docstring for where it stops and what it records. ``progress[0]`` is the
    position after the last record written and recorded, also when this raises (e.g. ``struct.error`` for a
    field out of its range): a record is recorded only once it is written, and nothing is written for a record
    whose result could not be built."""
    i = start
    while i < end:
        msg = msgs[i]
        body = msg.body
        blen = len(body)
        total = HEADER_SIZE + blen + len(msg.tail)
        if msg.limits_error or blen > max_body or total + END_FILE_MIN_BLANK_LENGTH > file_size:
            break  # refused: the caller's check answers it
        if total + END_FILE_MIN_BLANK_LENGTH > file_size - pos:
            break  # the caller rolls to the next segment
        phy = base + pos
        qkey = (msg.topic, msg.queue_id)
        qoff = table.get(qkey, 0)
        sys_flag = msg.sys_flag
        tags = msg.tags
        # the schedule topic's units carry the deliver time instead of a tag hash
        tags_code = store_ts + msg.delay_ms if msg.delay_ms else (tag_hash(tags) if tags else 0)
        result = result_cls(ok, phy, total, qoff, store_ts, store_host, store_port)
        HEADER.pack_into(
            buf, pos, total, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag, qoff, phy,
            sys_flag, msg.born_timestamp, msg.born_host, msg.born_port, store_ts, store_host, store_port,
            msg.reconsume_times, msg.prepared_transaction_offset, blen)
        p = pos + HEADER_SIZE + blen
        buf[pos + HEADER_SIZE:p] = body
        buf[p:pos + total] = msg.tail
        pending_append((phy, total, msg.topic, msg.queue_id, qoff, tags_code, store_ts, msg.keys, msg.uniq_key,
                        sys_flag))
        if (sys_flag & TRANSACTION_TYPE_MASK) not in _NO_QUEUE_ADVANCE:
            table[qkey] = qoff + 1
        results[i] = result
        pos += total
        progress[0] = pos
        i += 1
    return pos, i


# the pure function stays reachable: the store runs it for a message the C twin leaves, and the equality tests
py_append_messages = append_messages


def put_single(cl: Any, msg: Any, ok: Any, result_cls: Callable[..., Any]) -> Any:
    """One message's put into the CommitLog ``cl`` when it is the common case, else None with nothing done (the
    caller then takes its batch way, which waits for the lock, rolls segments and answers refusals).

    What ``cl.put_messages([msg])[0]`` does for a message that fits its last segment, in one call (the C twin
    holds the GIL from start to end): take ``cl.put_lock`` without waiting (None when another thread has it);
    ``now`` from the wall clock plus ``cl.clock.wall_offset`` (None there: a clock of its own, None here);
    :func:`append_messages` of ``msg`` into ``cl.mapped_file_queue.files[-1]``'s write buffer ``wv`` (None if there
    is no segment, it is full, or the message is not written: refused, past the segment's end, a field the loop
    does not take); for a staged segment the record ``pwrite`` into the file (``mf.fd``), then ``mf.commit`` on a
    failed write or ``mf.release_staged`` once ``mf.released`` lags a ``STAGE_RELEASE`` (the pure twin calls
    ``mf.commit``, which does both); the segment's ``wrote_position`` and ``store_timestamp``; ``cl._prefault(mf)``
    when the writer nears the end it last asked the prefault thread for (``mf.prefault_end``,
    ``cl.prefault.low_water``);
    ``cl.begin_time_in_lock`` set while the lock is held; then, the lock released, the dispatcher told
    (``cl.notify_append()``: ``cl.after_append()`` unless ``cl.dispatch_armed``, else ``cl.appended.set()`` if
    ``cl.wake_on_append``). Returns the result ``append_messages`` made."""
    offset = cl.clock.wall_offset
    if offset is None:
        return None
    lock = cl.put_lock
    if not lock.acquire(False):
        return None
    try:
        now = time.time_ns() // 1_000_000 + offset
        written = _put_locked(cl, msg, ok, result_cls, now)
    finally:
        cl.begin_time_in_lock = 0
        lock.release()
    if written is None:
        return None
    cl.notify_append()  # the C twin inlines it (the hook unless a dispatch is armed, else the event if asked)
    return written


def _put_locked(cl: Any, msg: Any, ok: Any, result_cls: Callable[..., Any], now: int) -> Any:
    files = cl.mapped_file_queue.files
    if not files:
        return None
    mf = files[-1]
    size = cl.mapped_file_size
    pos = mf.wrote_position
    if not 0 <= pos < size:
        return None
    cl.begin_time_in_lock = now
    results: list[Any] = [None]
    progress = [pos]
    # a field out of its range raises struct.error here as in the batch way, nothing recorded
    _, i = py_append_messages(mf.wv, pos, size, mf.file_from_offset, [msg], 0, 1, cl.max_message_size, now,
                              cl.store_host, cl.store_port, cl.topic_queue_table, cl.pending_dispatch.append, results,
                              ok, result_cls, progress)
    if i == 0:
        return None
    if mf.staged:
        mf.commit(pos, progress[0])
    mf.wrote_position = progress[0]
    mf.store_timestamp = now
    if cl._prefault_ahead:
        pf = cl.prefault
        if pf is None or (progress[0] + pf.low_water > mf.prefault_end and mf.prefault_end < mf.file_size):
            cl._prefault(mf)
    return results[0]


py_put_single = put_single
# The store calls put_single only in C (its pure twin, the reference the tests hold it to, is no faster than the
# batch way): None under BROKER_CORE_PURE_PYTHON=1.
native_put_single: Callable[[Any, Any, Any, Callable[..., Any]], Any] | None = None
if NATIVE is not None:
    append_messages = NATIVE.append_messages
    put_single = native_put_single = NATIVE.put_single
