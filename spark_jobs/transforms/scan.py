"""The per-split record scan the jobs run on executors (and ``bench/scan.py`` runs in one process).

``scan_split`` walks the records a split owns (see ``spark_jobs.segments``), counts those in the store-time and
topic range, applies the raw-byte prefilters, decodes only candidates with the codec and keeps those a
matcher accepts. The body-substring check runs ``find`` over the mapping and only looks at a record's body
when the next occurrence falls inside it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from broker_core.codec import CodecError
from broker_core.codec.message import (
    COMPRESSED_FLAG,
    F_BODY_LENGTH,
    F_MAGIC,
    F_STORE_TIMESTAMP,
    F_SYS_FLAG,
    F_TOTAL_SIZE,
    FIXED_OVERHEAD,
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    MessageRecord,
)
from spark_jobs.segments import Split, SplitStats, decode_at, finish, record_row, sync
from spark_jobs.split_io import over_split
from spark_jobs.transforms.filters import Compiled

_INF = 1 << 62


def scan_split(split: Split, matcher: Compiled, *, limit: int | None = None,
               accept: Callable[[MessageRecord], bool] | None = None,
               any_of: tuple[bytes, ...] = ()) -> tuple[SplitStats, list[dict[str, Any]]]:
    """Scan one split; returns its stats (``extra["matched"]``) and the matching rows (at most ``limit``).
    ``accept`` replaces the matcher's exact check; ``any_of``: at least one must occur in the record's bytes."""
    return over_split(split, lambda buf, sp: _scan(buf, sp, matcher, limit, accept, any_of))


def _scan(buf: Any, split: Split, matcher: Compiled, limit: int | None,
          accept: Callable[[MessageRecord], bool] | None,
          any_of: tuple[bytes, ...]) -> tuple[SplitStats, list[dict[str, Any]]]:
    stats = SplitStats(split.index, split.segment)
    rows: list[dict[str, Any]] = []
    matched = 0
    pos = sync(buf, split)
    stats.first = pos
    if pos < 0:
        stats.stop = "split end"
        stats.extra["matched"] = 0
        return stats, rows
    first = pos
    end, bound = split.end, split.bound
    unpack = HEADER.unpack_from
    find = buf.find
    lo, hi, topics = matcher.lo, matcher.hi, matcher.topics
    needle = matcher.body_needle
    nlen = len(needle) if needle else 0
    must = matcher.must
    exact = accept or matcher.exact
    hit = -1
    records = scanned = 0
    while pos < end:
        if pos + HEADER_SIZE > bound:
            break
        f = unpack(buf, pos)
        total = f[F_TOTAL_SIZE]
        if f[F_MAGIC] != MESSAGE_MAGIC_CODE or total < FIXED_OVERHEAD or pos + total > bound:
            break
        nxt = pos + total
        records += 1
        ts = f[F_STORE_TIMESTAMP]
        if ts < lo or ts > hi:
            pos = nxt
            continue
        blen = f[F_BODY_LENGTH]
        body_s = pos + HEADER_SIZE
        body_e = body_s + blen
        if topics is not None:
            tlen = buf[body_e]
            if buf[body_e + 1:body_e + 1 + tlen] not in topics:
                pos = nxt
                continue
        scanned += 1
        if needle is not None:
            if f[F_SYS_FLAG] & COMPRESSED_FLAG:
                try:
                    if needle not in zlib.decompress(buf[body_s:body_e]):
                        pos = nxt
                        continue
                except zlib.error:
                    pos = nxt
                    continue
            elif body_e > end:
                if find(needle, body_s, body_e) < 0:
                    pos = nxt
                    continue
            else:
                if hit < body_s:
                    hit = find(needle, body_s, end)
                    if hit < 0:
                        hit = _INF
                if hit + nlen > body_e:
                    pos = nxt
                    continue
        skip = False
        for m in must:
            if find(m, pos, nxt) < 0:
                skip = True
                break
        if any_of and not skip:
            skip = True
            for m in any_of:
                if find(m, pos, nxt) >= 0:
                    skip = False
                    break
        if skip:
            pos = nxt
            continue
        try:
            rec = decode_at(buf, pos, split)
        except CodecError:
            break  # lengths inside the record are inconsistent: a torn record ends the walk
        if exact(rec):
            matched += 1
            if limit is None or len(rows) < limit:
                rows.append(record_row(rec, split, pos))
        pos = nxt
    stats.records = records
    stats.scanned = scanned
    stats.last_end = pos
    stats.bytes = pos - first
    stats.extra["matched"] = matched
    finish(buf, split, stats, pos)
    return stats, rows
