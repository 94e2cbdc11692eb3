"""The epoch file of controller mode (RocketMQ 5 ``EpochFileCache`` over ``CheckpointFile``; reference
``rocketmq-controller.md`` §4.1): which master epoch wrote which range of the CommitLog.

Text layout (``storePathEpochFile``, default ``<storePathRootDir>/epochFileCheckpoint``), ``\\n`` line ends:

| line | content |
|---|---|
| 1 | number of entries |
| 2 | CRC32 of the entry lines (each with its ``\\n``) ``& 0x7FFFFFFF``; 0 means "not checked" |
| 3.. | one ``epoch-startOffset`` line per entry, ascending (``7-7000``) |

The end offset of an entry is not stored: it is the next entry's start offset, or ``Long.MAX_VALUE`` for the
last one (the callers replace that with the CommitLog's max offset where they compare ranges).

Invariants:
1. Entries ascend strictly in both epoch and start offset: :meth:`EpochFile.append` refuses (returns False) an
   entry whose epoch or start offset is not greater than the last one's.
2. Every change is written before the method returns: the old content is copied to ``<file>.bak`` first, then the
   file is overwritten and fsynced.
3. The in-memory list and the file hold the same entries once a method returns.

Crash behaviour: a crash while the file is overwritten leaves it empty, short or with a wrong count or CRC; the
next load then reads ``<file>.bak``, which holds the content before that write (one change older). Losing the
newest entry that way is safe: the broker appends its epoch again when it next becomes master, and a slave's
truncation (``find_consistent_point``) works from older entries (it cuts more, never keeps a wrong byte). Both
files unreadable -> an empty cache, which skips truncation (as upstream).
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX


def entries_crc(lines: list[str]) -> int:
    """CRC32 of the entry lines, each with its line separator, ``& 0x7FFFFFFF`` (``CheckpointFile``)."""
    return zlib.crc32("".join(line + "\n" for line in lines).encode()) & 0x7FFFFFFF


def encode_epoch_file(entries: list[EpochEntry]) -> str:
    lines = [f"{e.epoch}-{e.start_offset}" for e in entries]
    return f"{len(lines)}\n{entries_crc(lines)}\n" + "".join(line + "\n" for line in lines)


def decode_epoch_file(text: str) -> list[EpochEntry] | None:
    """The entries, or None when the text is empty or its count, CRC or an entry line is wrong."""
    lines = text.splitlines()
    if len(lines) < 2:
        return None
    try:
        count, crc = int(lines[0].strip()), int(lines[1].strip())
        body = [line.strip() for line in lines[2:] if line.strip()]
        if count != len(body) or (crc != 0 and crc != entries_crc(body)):
            return None
        pairs = [line.split("-", 1) for line in body]
        out = [EpochEntry(int(e), int(s)) for e, s in pairs]
    except ValueError:
        return None
    return _with_ends(out)


def _with_ends(entries: list[EpochEntry]) -> list[EpochEntry]:
    return [EpochEntry(e.epoch, e.start_offset, entries[i + 1].start_offset if i + 1 < len(entries) else LONG_MAX)
            for i, e in enumerate(entries)]


class EpochFile:
    """The persisted epoch cache; thread-safe (the HA service and the role change both touch it)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.bak = Path(f"{self.path}.bak")
        self._lock = threading.Lock()
        self._entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        for p in (self.path, self.bak):
            try:
                text = p.read_text()
            except (FileNotFoundError, UnicodeDecodeError):
                continue
            entries = decode_epoch_file(text)
            if entries is not None:
                if p is self.bak:
                    log.warning("epoch file %s unreadable; took %s", self.path, self.bak)
                return entries
        return []

    def _write(self, entries: list[EpochEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            old = self.path.read_bytes()
            if decode_epoch_file(old.decode(errors="replace")) is not None:
                _write_synced(self.bak, old)
        _write_synced(self.path, encode_epoch_file(entries).encode())
        self._entries = _with_ends(entries)

    # ------------------------------------------------------------------ reads
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def last(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    def last_epoch(self) -> int:
        last = self.last()
        return last.epoch if last else 0

    def find(self, epoch: int) -> EpochEntry | None:
        with self._lock:
            for e in self._entries:
                if e.epoch == epoch:
                    return e
        return None

    def next_after(self, epoch: int) -> EpochEntry | None:
        """The first entry with an epoch above ``epoch`` (where a transfer batch of ``epoch`` must stop)."""
        with self._lock:
            for e in self._entries:
                if e.epoch > epoch:
                    return e
        return None

    def entry_at(self, offset: int) -> EpochEntry | None:
        """The entry whose range holds CommitLog ``offset`` (the last entry's range is open)."""
        with self._lock:
            found = None
            for e in self._entries:
                if e.start_offset <= offset:
                    found = e
            return found

    # ------------------------------------------------------------------ changes
    def append(self, epoch: int, start_offset: int) -> bool:
        """Add ``(epoch, start_offset)`` if both are above the last entry's; False (nothing written) otherwise.
        The same entry appended twice is accepted as a no-op (True)."""
        with self._lock:
            last = self._entries[-1] if self._entries else None
            if last is not None:
                if last.epoch == epoch and last.start_offset == start_offset:
                    return True
                if epoch <= last.epoch or start_offset <= last.start_offset:
                    return False
            self._write([*self._entries, EpochEntry(epoch, start_offset)])
            return True

    def append_after_empty(self, epoch: int, start_offset: int) -> bool:
        """:meth:`append`, except that a last entry starting at ``start_offset`` with a lower epoch (an epoch that
        wrote no byte: its range is empty) is replaced. Used by a new master and by a slave taking a newer epoch."""
        with self._lock:
            last = self._entries[-1] if self._entries else None
            if last is not None and last.start_offset == start_offset and last.epoch < epoch:
                self._write([*self._entries[:-1], EpochEntry(epoch, start_offset)])
                return True
        return self.append(epoch, start_offset)

    def truncate_suffix_from_offset(self, offset: int) -> None:
        """Drop entries with ``start_offset >= offset`` (after a CommitLog cut at ``offset``)."""
        with self._lock:
            keep = [e for e in self._entries if e.start_offset < offset]
            if len(keep) != len(self._entries):
                self._write(keep)

    def truncate_suffix_from_epoch(self, epoch: int) -> None:
        """Drop entries with ``epoch >= epoch`` (a new master before appending its epoch)."""
        with self._lock:
            keep = [e for e in self._entries if e.epoch < epoch]
            if len(keep) != len(self._entries):
                self._write(keep)

    def truncate_prefix_by_offset(self, min_phy_offset: int) -> None:
        """CommitLog files expired: drop entries with ``end_offset <= min_phy_offset - 1`` (never the last)."""
        with self._lock:
            keep = [e for e in self._entries if e.end_offset > min_phy_offset - 1]
            if len(keep) != len(self._entries):
                self._write(keep)

    def reset(self, entries: list[EpochEntry]) -> None:
        with self._lock:
            self._write(list(entries))


def find_consistent_point(local: list[EpochEntry], local_max: int, master: list[EpochEntry],
                          master_max: int) -> int:
    """RocketMQ's ``EpochFileCache.findConsistentPoint``: walking the local epochs from the highest, at the first
    epoch the master also holds with the same start offset, the point is the smaller of the two end offsets (each
    side's last end is its CommitLog max offset). -1 when no epoch matches."""
    if not local or not master:
        return -1
    lo = [EpochEntry(e.epoch, e.start_offset, local_max if i == len(local) - 1 else e.end_offset)
          for i, e in enumerate(local)]
    ma = {e.epoch: EpochEntry(e.epoch, e.start_offset, master_max if i == len(master) - 1 else e.end_offset)
          for i, e in enumerate(master)}
    for e in reversed(lo):
        m = ma.get(e.epoch)
        if m is not None and m.start_offset == e.start_offset:
            return min(e.end_offset, m.end_offset)
    return -1


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
