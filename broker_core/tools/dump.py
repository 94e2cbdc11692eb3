"""Read-only inspection of a store directory: ``python -m broker_core.tools.dump STORE_DIR``.

Prints the marker files, the checkpoint, every CommitLog segment with its records, every ConsumeQueue
with its offsets, and every IndexFile header. It opens files read-only and takes no lock, so it can
run beside a live broker (it then sees a moment's state). All decoding goes through
``broker_core.codec``.
"""

from __future__ import annotations

import argparse
import json
import mmap
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from broker_core.codec import CodecError
from broker_core.codec.checkpoint import decode_checkpoint
from broker_core.codec.consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT
from broker_core.codec.index_file import INDEX_HEADER_SIZE, decode_header
from broker_core.codec.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    decode_record,
    peek_size_magic,
)


def _ts(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds")


def _map(path: Path) -> mmap.mmap | None:
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def iter_segment(path: Path, check_crc: bool = True) -> Iterator[tuple[int, object]]:
    """Yield ``(position, MessageRecord | "blank" | "end" | CodecError)`` for one CommitLog segment."""
    mm = _map(path)
    if mm is None:
        return
    try:
        pos = 0
        while pos + 8 <= len(mm):
            total, magic = peek_size_magic(memoryview(mm), pos)
            if magic == BLANK_MAGIC_CODE:
                yield pos, "blank"
                return
            if total == 0 and magic == 0:
                yield pos, "end"
                return
            if magic != MESSAGE_MAGIC_CODE:
                yield pos, CodecError(f"bad magic code 0x{magic:08X}", str(path), pos)
                return
            try:
                rec = decode_record(memoryview(mm), pos, source=str(path), check_crc=check_crc)
            except CodecError as exc:
                yield pos, exc
                return
            yield pos, rec
            pos += total
    finally:
        try:
            mm.close()
        except BufferError:  # a record the caller still holds views the map: it is unmapped when they are gone
            pass


def dump(store: Path, *, records: int, topic: str | None, out: list[dict]) -> None:
    info: dict = {"store": str(store)}
    info["abort"] = (store / "abort").exists()
    lock = store / "lock"
    info["lock_pid"] = lock.read_text().strip() if lock.exists() else None
    cp = store / "checkpoint"
    if cp.exists():
        try:
            p, lg, ix = decode_checkpoint(cp.read_bytes(), str(cp))
            info["checkpoint"] = {"physic": _ts(p), "logics": _ts(lg), "index": _ts(ix)}
        except CodecError as exc:
            info["checkpoint"] = {"error": str(exc)}
    out.append({"kind": "store", **info})
    shown = 0
    for seg in sorted((store / "commitlog").glob("[0-9]" * 20)):
        count = 0
        end = None
        for pos, item in iter_segment(seg):
            if isinstance(item, str):
                end = f"{item} at {pos}"
                break
            if isinstance(item, CodecError):
                end = f"error: {item}"
                break
            count += 1
            if shown < records and (topic is None or item.topic == topic):  # type: ignore[attr-defined]  # item is a MessageRecord here (str and CodecError handled above)
                shown += 1
                rec = item
                out.append({
                    "kind": "record", "segment": seg.name, "phy_offset": rec.commit_log_offset,  # type: ignore[attr-defined]  # item is a MessageRecord here (str and CodecError handled above)
                    "size": rec.store_size, "topic": rec.topic, "queue_id": rec.queue_id,  # type: ignore[attr-defined]  # item is a MessageRecord here (str and CodecError handled above)
                    "queue_offset": rec.queue_offset, "stored": _ts(rec.store_timestamp),  # type: ignore[attr-defined]  # item is a MessageRecord here (str and CodecError handled above)
                    "msg_id": rec.offset_msg_id, "properties": rec.properties,  # type: ignore[attr-defined]  # item is a MessageRecord here (str and CodecError handled above)
                    "body": rec.body[:64].decode("utf-8", "replace"),  # type: ignore[attr-defined]  # item is a MessageRecord here (str and CodecError handled above)
                })
        out.append({"kind": "segment", "name": seg.name, "bytes": seg.stat().st_size, "records": count,
                    "end": end or "file end"})
    cq_root = store / "consumequeue"
    if cq_root.is_dir():
        for tdir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
            if topic is not None and tdir.name != topic:
                continue
            for qdir in sorted((p for p in tdir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
                files = sorted(qdir.glob("[0-9]" * 20))
                units = first = 0
                if files:
                    first = int(files[0].name) // CQ_STORE_UNIT_SIZE
                for f in files:
                    mm = _map(f)
                    if mm is None:
                        continue
                    with mm:
                        for pos in range(0, len(mm) - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
                            _, size, _ = CQ_UNIT.unpack_from(mm, pos)
                            if size <= 0:
                                break
                            if size != BLANK_UNIT_SIZE:
                                units += 1
                out.append({"kind": "queue", "topic": tdir.name, "queue_id": int(qdir.name), "files": len(files),
                            "first_unit": first, "units": units})
    idx_root = store / "index"
    if idx_root.is_dir():
        for f in sorted(p for p in idx_root.iterdir() if p.is_file()):
            with open(f, "rb") as fh:
                head = fh.read(INDEX_HEADER_SIZE)
            try:
                b_ts, e_ts, b_phy, e_phy, slots, count = decode_header(head, str(f))
                out.append({"kind": "index", "name": f.name, "begin": _ts(b_ts), "end": _ts(e_ts),
                            "begin_phy": b_phy, "end_phy": e_phy, "used_slots": slots, "entries": count - 1})
            except CodecError as exc:
                out.append({"kind": "index", "name": f.name, "error": str(exc)})


def _text(row: dict) -> str:
    kind = row.pop("kind")
    return f"{kind:8} " + "  ".join(f"{k}={v}" for k, v in row.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m broker_core.tools.dump",
        description="Print a store directory's segments, queues, index files and records (read-only).")
    parser.add_argument("store_dir", type=Path, help="the broker's store directory (storePathRootDir)")
    parser.add_argument("--records", type=int, default=20, help="how many records to print (default 20)")
    parser.add_argument("--topic", help="only records and queues of this topic")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    if not args.store_dir.is_dir():
        print(f"error: {args.store_dir} is not a directory", file=sys.stderr)
        return 2
    rows: list[dict] = []
    dump(args.store_dir, records=args.records, topic=args.topic, out=rows)
    for row in rows:
        print(json.dumps(row, default=str) if args.json else _text(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
