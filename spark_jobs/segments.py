"""Reading snapshot segments: split planning, record-boundary sync and the record walk (no Spark here).

A snapshot segment is a hard link of a CommitLog segment with a ``bound``: the bytes a reader may read.
Files are mapped read-only with length ``bound``, so nothing past it can be read, even through the active
segment's link (which the broker keeps appending to).

Splits: a segment is cut into byte ranges ``[start, end)``; a split owns the records that START in its
range and reads past ``end`` to finish its last one. A split that starts inside a segment finds its first
record by sync: the first position ``c >= start`` holding the message magic whose PHYSICALOFFSET field equals
the segment's ``fileFromOffset + c`` and that :func:`broker_core.codec.message.check_record` accepts (CRC
included). Each split reports ``first`` (its first record) and ``last_end`` (the end of its last record);
:func:`chain_breaks` checks that the chain of splits of a segment is continuous, which is exactly what a
sequential walk from the segment start would give. A body crafted to look like a record could fool sync;
the chain check detects it and the caller re-reads that segment as one split.

Where the bytes come from (the file, or the broker over the network): ``spark_jobs.split_io``.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker_core.codec.message import (
    BLANK_MAGIC_CODE,
    FIXED_OVERHEAD,
    HEADER_SIZE,
    LONG,
    MESSAGE_MAGIC_CODE,
    OFFSET_PHYSICAL_OFFSET,
    SIZE_MAGIC,
    MessageRecord,
    check_record,
    decode_record,
)

DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024
_MAGIC_BYTES = struct.pack(">I", MESSAGE_MAGIC_CODE)
_SIZE_MAGIC = SIZE_MAGIC
_LONG = LONG

STOP_BLANK = "blank"  # end-of-segment filler: a sealed segment's normal end
STOP_BOUND = "bound"  # reached the published bound: the active segment's normal end
STOP_END = "end of data"  # zeros where a record would start
STOP_SPLIT = "split end"  # the next record belongs to the next split


@dataclass(frozen=True)
class Segment:
    path: str
    file_from_offset: int
    bound: int
    remote: Any = None  # a spark_jobs.remote.Remote when the broker can serve the bytes over the network

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class Split:
    index: int
    path: str
    file_from_offset: int
    start: int
    end: int
    bound: int
    remote: Any = None  # as Segment.remote

    @property
    def segment(self) -> str:
        return os.path.basename(self.path)


@dataclass
class SplitStats:
    """What one split saw. ``first``/``last_end`` are -1 when it owned no record."""

    index: int
    segment: str
    first: int = -1
    last_end: int = -1
    stop: str = ""
    records: int = 0  # records walked (every topic and time)
    scanned: int = 0  # records in the job's topic/time range
    bytes: int = 0
    torn: dict[str, Any] | None = None  # {"segment", "pos", "reason", "bytes"} when the walk hit a bad record
    extra: dict[str, Any] = field(default_factory=dict)


def segments_from_manifest(manifest: dict[str, Any] | str | os.PathLike[str]) -> list[Segment]:
    """Segments of a snapshot manifest (the dict ``AdminClient.snapshot_segments`` returns, its
    ``manifest.json``, or the snapshot directory holding it). A manifest the caller gave ``brokerAddr`` (and
    optionally ``preferLocal``: false to always fetch) can be read over the network with its ``readToken``."""
    if isinstance(manifest, dict):
        doc = manifest
    else:
        p = Path(manifest)
        if p.is_dir():
            p = p / "manifest.json"
        doc = json.loads(p.read_text())
    remote = None
    if doc.get("brokerAddr") and doc.get("readToken"):
        from spark_jobs.remote import Remote

        remote = Remote(str(doc["brokerAddr"]), str(doc["snapshotId"]), str(doc["readToken"]),
                        bool(doc.get("preferLocal", True)))
    return [Segment(s["path"], int(s["fileFromOffset"]), int(s["bound"]), remote) for s in doc["segments"]]


def segments_of(manifests: Iterable[dict[str, Any] | str | os.PathLike[str]]) -> list[Segment]:
    """The segments of several snapshots (one per broker), in order."""
    return [seg for m in manifests for seg in segments_from_manifest(m)]


def plan_splits(segments: Iterable[Segment], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[Split]:
    splits: list[Split] = []
    for seg in segments:
        if seg.bound <= 0:
            continue
        start = 0
        while start < seg.bound:
            end = min(seg.bound, start + split_bytes)
            splits.append(Split(len(splits), seg.path, seg.file_from_offset, start, end, seg.bound, seg.remote))
            start = end
    return splits


def whole_segment_splits(splits: Iterable[Split], segments: set[str], first_index: int) -> list[Split]:
    """One split per named segment (the fallback after a chain break)."""
    seen: dict[str, Split] = {}
    for s in splits:
        if s.path in segments and s.path not in seen:
            seen[s.path] = s
    return [Split(first_index + i, s.path, s.file_from_offset, 0, s.bound, s.bound, s.remote)
            for i, s in enumerate(seen.values())]


def open_segment(path: str, bound: int) -> mmap.mmap:
    """A read-only mapping of the first ``bound`` bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, bound, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def sync(buf: Any, split: Split) -> int:
    """The first record start in ``[split.start, split.end)``, or -1."""
    if split.start == 0:
        return 0
    lo = split.start
    find = buf.find
    while True:
        i = find(_MAGIC_BYTES, lo + 4, split.end + 8)
        if i < 0 or i - 4 >= split.end:
            return -1
        c = i - 4
        lo = c + 1
        total = _SIZE_MAGIC.unpack_from(buf, c)[0]
        if total < FIXED_OVERHEAD or c + total > split.bound:
            continue
        if _LONG.unpack_from(buf, c + OFFSET_PHYSICAL_OFFSET)[0] != split.file_from_offset + c:
            continue
        if check_record(buf, c, split.bound, check_crc=True).success:
            return c


def classify_stop(buf: Any, pos: int, bound: int) -> str:
    """Why the walk cannot go on at ``pos``: blank, bound, zeros or the codec's reason for a bad record."""
    if pos + 8 > bound:
        return STOP_BOUND
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return STOP_BLANK
    if total == 0 and magic == 0:
        return STOP_END
    req = check_record(buf, pos, bound, check_crc=False)
    if req.success:
        return STOP_SPLIT
    return req.error or "bad record"


def walk(buf: Any, split: Split, stats: SplitStats) -> Iterator[int]:
    """Yield the start of every record the split owns; fills ``stats`` (first, last_end, stop, torn, records,
    bytes). Records are checked for magic and lengths (the codec's CRC check is left to decoding)."""
    pos = sync(buf, split)
    stats.first = pos
    if pos < 0:
        stats.stop = STOP_SPLIT
        return
    end, bound = split.end, split.bound
    unpack = _SIZE_MAGIC.unpack_from
    start = pos
    while pos < end:
        if pos + HEADER_SIZE > bound:
            break
        total, magic = unpack(buf, pos)
        if magic != MESSAGE_MAGIC_CODE or total < FIXED_OVERHEAD or pos + total > bound:
            break
        yield pos
        stats.records += 1
        pos += total
    stats.last_end = pos
    stats.bytes = pos - start
    finish(buf, split, stats, pos)


def finish(buf: Any, split: Split, stats: SplitStats, pos: int) -> None:
    """Record why a walk ended at ``pos`` (and a torn tail)."""
    why = classify_stop(buf, pos, split.bound)
    stats.stop = why
    if why == STOP_BLANK:
        stats.bytes += split.bound - pos  # the filler is walked too: a split's bytes add up to the bound
    if why not in (STOP_BLANK, STOP_BOUND, STOP_END, STOP_SPLIT):
        stats.torn = {"segment": split.segment, "pos": pos, "phyOffset": split.file_from_offset + pos,
                      "reason": why, "bytes": split.bound - pos}
    elif why == STOP_END:
        stats.torn = {"segment": split.segment, "pos": pos, "phyOffset": split.file_from_offset + pos,
                      "reason": why, "bytes": split.bound - pos} if any(buf[pos:split.bound]) else None


def chain_breaks(splits: list[Split], stats: dict[int, SplitStats]) -> set[str]:
    """Segments (paths) whose splits do not chain as a sequential walk would: those are re-read whole."""
    broken: set[str] = set()
    expected: dict[str, int] = {}
    ended: set[str] = set()
    for sp in sorted(splits, key=lambda s: (s.path, s.start)):
        st = stats[sp.index]
        exp = expected.get(sp.path, 0)
        if sp.path in ended:
            if st.first >= 0:
                broken.add(sp.path)
            continue
        if exp >= sp.end:
            if st.first >= 0:
                broken.add(sp.path)
            continue
        if st.first < 0:
            broken.add(sp.path)  # the previous split saw a record at ``exp`` that this one could not sync to
            continue
        if st.first != exp:
            broken.add(sp.path)
            continue
        expected[sp.path] = st.last_end
        if st.stop != STOP_SPLIT:
            ended.add(sp.path)
    return broken


def merge_torn(splits: list[Split], stats: dict[int, SplitStats]) -> list[dict[str, Any]]:
    """Torn tails, one per segment at most (the first split that stopped on a bad record)."""
    out: dict[str, dict[str, Any]] = {}
    for sp in sorted(splits, key=lambda s: (s.path, s.start)):
        st = stats.get(sp.index)
        if st is not None and st.torn and sp.path not in out:
            out[sp.path] = st.torn
    return list(out.values())


def decode_at(buf: Any, pos: int, split: Split, check_crc: bool = False) -> MessageRecord:
    """The codec's decode of the record at ``pos`` (the same function the broker's reads use)."""
    return decode_record(buf, pos, source=split.path, base_offset=0, check_crc=check_crc)


def record_row(rec: MessageRecord, split: Split, pos: int) -> dict[str, Any]:
    """The columns of one record (see ``sources.RECORD_SCHEMA``)."""
    return {
        "topic": rec.topic, "queue_id": rec.queue_id, "queue_offset": rec.queue_offset,
        "phy_offset": rec.commit_log_offset, "store_size": rec.store_size, "msg_id": rec.msg_id,
        "uniq_key": rec.uniq_key, "offset_msg_id": rec.offset_msg_id, "keys": rec.keys, "tags": rec.tags,
        "properties": rec.properties, "born_timestamp": rec.born_timestamp, "store_timestamp": rec.store_timestamp,
        "born_host": rec.born_host, "store_host": rec.store_host, "reconsume_times": rec.reconsume_times,
        "sys_flag": rec.sys_flag, "flag": rec.flag, "body_crc": rec.body_crc,
        "prepared_transaction_offset": rec.prepared_transaction_offset, "body": rec.body,
        "segment": split.segment, "pos": pos,
    }


def stats_dict(st: SplitStats) -> dict[str, Any]:
    return asdict(st)
