"""Segment snapshots: hard links of CommitLog segments for offline readers (the Spark jobs).

A snapshot is a directory ``<store root>/snapshots/<id>/`` holding hard links of the CommitLog segments that
overlap a time or physical-offset range, plus ``manifest.json`` naming each file with its byte bound.
Readers open only the snapshot directory, never the store's own files.

Invariants:
1. Every entry's ``bound`` is a published read position: sealed segments give their file size (the last
   bytes are the blank filler), the active segment gives its ``wrote_position`` at the moment of the snapshot.
   Every byte below a bound is a complete record or the blank record; readers must not read at or past it
   (the active segment's link is the same inode the broker keeps appending to).
2. A hard link shares the inode, so retention deleting a segment (unlink) while a job runs leaves the
   snapshot's link readable; the space is freed when the snapshot is released.
3. A segment is held (``MappedFile.hold``) while it is linked, so it cannot be destroyed half way; a segment
   already being destroyed is skipped and reported in ``skipped``.
4. Snapshots live under the store root, so links never cross file systems; ids are ``[A-Za-z0-9_.-]`` names.
5. Every snapshot expires: ``manifest.json`` holds ``expiresMs`` and :meth:`SegmentSnapshots.clean_expired`
   (called by the broker on a timer and before each new snapshot) removes expired ones.
6. Network readers (:meth:`SegmentSnapshots.open_range`, the broker's READ_SNAPSHOT_SEGMENT) read the snapshot's own
   links, never at or past an entry's ``bound`` (so invariants 1 and 2 hold for them too), and only with the
   snapshot's ``readToken``: 128 random bits in the manifest, handed to whoever took the snapshot.

Crash behaviour: a snapshot is built in ``<id>.tmp`` and renamed once its manifest is written, so a
crash leaves either a complete snapshot or a ``.tmp`` directory, which the next cleaning pass removes.
After a power loss the broker's recovery may truncate and rewrite the active segment below the bound a
snapshot recorded (records past the last flush are lost); a reader of such a snapshot sees the rewritten
bytes, which the record walk's checks (magic, lengths, physical offset) stop at.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import secrets
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_core.codec.message import MESSAGE_MAGIC_CODE, OFFSET_STORE_TIMESTAMP, peek_size_magic
from broker_core.store.errors import StoreError

if TYPE_CHECKING:
    from broker_core.store.commit_log import CommitLog
    from broker_core.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

SNAPSHOTS_DIR = "snapshots"
MANIFEST = "manifest.json"
DEFAULT_TTL_MS = 2 * 3600 * 1000
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
NO_LIMIT = (1 << 63) - 1


def _first_store_timestamp(mf: MappedFile) -> int | None:
    """STORETIMESTAMP of the segment's first record (None when it starts with no message)."""
    head = mf.read(0, OFFSET_STORE_TIMESTAMP + 8)
    if head is None:
        return None
    _, magic = peek_size_magic(head, 0)
    if magic != MESSAGE_MAGIC_CODE:
        return None
    return int.from_bytes(head[OFFSET_STORE_TIMESTAMP:OFFSET_STORE_TIMESTAMP + 8], "big", signed=True)


class SegmentSnapshots:
    """Creates, lists, releases and expires snapshots of one CommitLog."""

    def __init__(self, commit_log: CommitLog, root: str | os.PathLike[str], now_ms: Callable[[], int],
                 store_host: Callable[[], str] | None = None) -> None:
        self.commit_log = commit_log
        self.root = Path(root).resolve()
        self.now_ms = now_ms
        self.store_host = store_host
        self._lock = threading.Lock()

    def _dir_of(self, snapshot_id: str) -> Path:
        if not _ID.match(snapshot_id) or snapshot_id.endswith(".tmp") or snapshot_id in (".", ".."):
            raise ValueError(f"bad snapshot id {snapshot_id!r}: use 1-100 of [A-Za-z0-9_.-], not ending in .tmp")
        return self.root / snapshot_id

    def resolve_export_dir(self, export_dir: str | None) -> str:
        """An id for ``export_dir`` (a name, or an absolute path directly under the snapshots directory)."""
        if not export_dir:
            return f"{self.now_ms()}-{uuid.uuid4().hex[:8]}"
        p = Path(export_dir)
        if p.is_absolute():
            if p.resolve().parent != self.root:
                raise ValueError(f"export dir must be directly under {self.root}")
            return p.name
        return export_dir

    # ------------------------------------------------------------------ create
    def take(self, *, begin_ms: int | None = None, end_ms: int | None = None, begin_offset: int | None = None,
             end_offset: int | None = None, snapshot_id: str | None = None,
             ttl_ms: int = DEFAULT_TTL_MS) -> dict[str, Any]:
        """Hard-link the segments overlapping ``[begin_ms, end_ms]`` (store time) and ``[begin_offset,
        end_offset)`` (physical offset) into a new snapshot directory; returns its manifest.

        A segment is selected by time when its first record's store time is <= ``end_ms`` and the next
        segment's first store time (its last record's upper bound; unbounded for the last segment) is >=
        ``begin_ms``: a superset, so readers still filter records by their own store time."""
        sid = self.resolve_export_dir(snapshot_id)
        final = self._dir_of(sid)
        lo_ms = begin_ms if begin_ms is not None else 0
        hi_ms = end_ms if end_ms is not None else NO_LIMIT
        lo_off = begin_offset if begin_offset is not None else 0
        hi_off = end_offset if end_offset is not None else NO_LIMIT
        self.clean_expired()
        with self._lock:
            if final.exists():
                raise FileExistsError(f"snapshot {final} exists")
            tmp = final.with_name(final.name + ".tmp")
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            try:
                manifest = self._link(tmp, final, lo_ms, hi_ms, lo_off, hi_off, ttl_ms, sid)
                (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        log.info("snapshot %s: %d segments, %d bytes", sid, len(manifest["segments"]), manifest["totalBytes"])
        return manifest

    def _link(self, tmp: Path, final: Path, lo_ms: int, hi_ms: int, lo_off: int, hi_off: int, ttl_ms: int,
              sid: str) -> dict[str, Any]:
        files = self.commit_log.mapped_file_queue.files  # copy-on-write list: a stable view
        size = self.commit_log.mapped_file_size
        firsts = [_first_store_timestamp(mf) for mf in files]
        segments: list[dict[str, Any]] = []
        skipped: list[str] = []
        for i, mf in enumerate(files):
            start, end = mf.file_from_offset, mf.file_from_offset + size
            if end <= lo_off or start >= hi_off:
                continue
            first_ts = firsts[i]
            upper_ts = next((t for t in firsts[i + 1:] if t is not None), NO_LIMIT)
            if first_ts is not None and first_ts > hi_ms:
                continue
            if upper_ts < lo_ms:
                continue
            if not mf.hold():
                skipped.append(mf.path.name)
                continue
            try:
                bound = mf.wrote_position  # read before linking: a published position (invariant 1)
                if bound <= 0:
                    continue
                target = tmp / mf.path.name
                try:
                    os.link(mf.path, target)
                except FileNotFoundError:
                    skipped.append(mf.path.name)
                    continue
                except OSError as exc:
                    raise StoreError(f"cannot hard-link {mf.path} into {tmp}: {exc}") from exc
            finally:
                mf.release()
            segments.append({
                "path": str(final / mf.path.name), "fileName": mf.path.name, "fileFromOffset": start,
                "fileSize": size, "bound": bound, "sealed": bound >= size,
                "firstStoreTimestamp": first_ts if first_ts is not None else -1})
        now = self.now_ms()
        return {"snapshotId": sid, "exportDir": str(final), "createdMs": now, "expiresMs": now + ttl_ms,
                "beginTimestamp": lo_ms, "endTimestamp": hi_ms, "beginOffset": lo_off, "endOffset": hi_off,
                "storeHost": self.store_host() if self.store_host else "", "readToken": secrets.token_hex(16),
                "segments": segments, "skipped": skipped, "totalBytes": sum(s["bound"] for s in segments)}

    # ------------------------------------------------------------------ network reads
    def read(self, snapshot_id: str, segment: str, offset: int, length: int, token: str) -> tuple[bytes, int]:
        """``(bytes, bound)``: the bytes :meth:`open_range` designates, read (same checks, same errors)."""
        fd, n, bound = self.open_range(snapshot_id, segment, offset, length, token)
        try:
            return (os.pread(fd, n, offset) if n else b""), bound
        finally:
            os.close(fd)

    def open_range(self, snapshot_id: str, segment: str, offset: int, length: int, token: str
                   ) -> tuple[int, int, int]:
        """``(fd, n, bound)``: an open descriptor of ``segment`` (its file name) in snapshot ``snapshot_id``, and
        the ``n`` bytes from ``offset`` (up to ``length``) to read from it, never at or past the segment's bound
        (0 at the bound). The caller owns ``fd`` and closes it. The descriptor is the snapshot's link, opened
        now, so retention deleting the segment meanwhile changes nothing (invariant 2) and a read racing a
        release either completes from its open descriptor or finds no snapshot. (The broker's
        READ_SNAPSHOT_SEGMENT sends the range with ``sendfile``.)

        Raises ``LookupError`` when the snapshot (released or expired) or the segment is not there,
        ``PermissionError`` for a wrong ``token``, ``ValueError`` for a negative offset or length."""
        if offset < 0 or length < 0:
            raise ValueError(f"bad range: offset {offset}, length {length}")
        path = self._dir_of(snapshot_id)
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except FileNotFoundError:
            raise LookupError(f"no snapshot {snapshot_id} (released or expired)") from None
        if not secrets.compare_digest(str(manifest.get("readToken", "")), token) or not token:
            raise PermissionError(f"wrong read token for snapshot {snapshot_id}")
        entry = next((e for e in manifest["segments"] if e.get("fileName") == segment), None)
        if entry is None:
            raise LookupError(f"snapshot {snapshot_id} has no segment {segment!r}")
        bound = int(entry["bound"])
        n = max(0, min(length, bound - offset))
        try:
            fd = os.open(path / segment, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise LookupError(f"no snapshot {snapshot_id} (released or expired)") from None
        return fd, n, bound

    # ------------------------------------------------------------------ release and expiry
    def release(self, snapshot_id: str) -> bool:
        """Remove a snapshot (its links and manifest). False when there was none."""
        path = self._dir_of(snapshot_id)
        with self._lock:
            if not path.exists():
                return False
            shutil.rmtree(path)
        return True

    def list(self) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        if not self.root.is_dir():
            return out
        for d in sorted(self.root.iterdir()):
            try:
                out.append(json.loads((d / MANIFEST).read_text()))
            except (OSError, ValueError):
                continue
        return out

    def clean_expired(self, now_ms: int | None = None) -> builtins.list[str]:
        """Remove expired snapshots, unfinished ``.tmp`` ones and directories without a readable manifest
        older than the default TTL (a crash mid-write). Returns the removed names."""
        now = self.now_ms() if now_ms is None else now_ms
        removed: list[str] = []
        if not self.root.is_dir():
            return removed
        with self._lock:
            for d in self.root.iterdir():
                if not d.is_dir():
                    continue
                if d.name.endswith(".tmp"):
                    expired = True
                else:
                    try:
                        expired = int(json.loads((d / MANIFEST).read_text())["expiresMs"]) <= now
                    except (OSError, ValueError, KeyError, TypeError):
                        expired = int(d.stat().st_mtime * 1000) + DEFAULT_TTL_MS <= now
                if expired:
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(d.name)
        if removed:
            log.info("removed expired snapshots %s", removed)
        return removed
