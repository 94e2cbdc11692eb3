"""Durable receive/ack state: which offsets each group was handed, until when, how often, and which are done.

RocketMQ 5 keeps POP checkpoints and ack marks as messages of an internal revive topic. We keep the same facts
in a small journaled file under ``<store>/config/`` instead: its size is bounded by the in-flight state
(``popInflightMessageThreshold`` per group), not by traffic, it is compacted in place, and it needs nothing
from the store but its directory.

Files:
- ``popState.json``: a snapshot ``{"version": 1, "serial": S, "maxReconsume": {group: n}, "queues": [{"group",
  "topic", "queueId", "next", "inflight": [[offset, deadlineMs, reconsumeTimes, serial], ...]}]}``, written as
  every config file is (``.tmp`` fsynced, renamed, directory fsynced; :mod:`broker_core.codec.config_file`).
- ``popState.journal``: one JSON line per change since that snapshot:
  ``{"k": "h", "g", "t", "q", "n": next, "m": maxReconsume, "o": [[offset, deadlineMs, reconsume, serial], ...]}``
  (handed out, or handed out again, or its invisible time changed) and ``{"k": "d", "g", "t", "q", "o":
  [offset, ...]}`` (done: acked, dead-lettered or removed by retention).

Invariants:
1. A change is in the journal (one ``write`` of whole lines) before the answer that depends on it is sent: a
   receive's messages before the receive's response, an ack before its SUCCESS.
2. Records hold absolute values (deadline, count, serial, ``next`` only grows) and "done" deletes, so replaying
   a journal over a snapshot that already includes it changes nothing: compaction writes the snapshot, then
   empties the journal, and a crash between the two is harmless.
3. Serials only grow, across restarts too (the snapshot and every record carry them; loading continues after
   the largest), so a receipt handle from before a restart never matches a later delivery.
4. Deadlines are wall-clock milliseconds, so they mean the same after a restart.
5. The journal is compacted when it passes ``max(1 MiB, 4 x the last snapshot)`` and at every start and clean
   shutdown, so its size is bounded by the state's.

Crash behaviour: SIGKILL loses nothing that was answered (the kernel has every record written before an
answer). Power loss: with SYNC_FLUSH each receive and ack is fsynced before its answer; with ASYNC_FLUSH the
journal is fsynced once a second, so the last second's changes may be lost: a lost ack makes its message come
back after its deadline, a lost receive hands its messages out again with the earlier count (at least once;
nothing is lost, a count may fall short by the lost receives). A line torn by a crash ends the replay there
(logged) and is dropped by the compaction that follows the load.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_core.codec.config_file import read_config_file, write_config_file

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "popState.json"
JOURNAL_FILE = "popState.journal"
COMPACT_MIN_BYTES = 1024 * 1024

QueueKey = tuple[str, str, int]  # (group, topic, queue id)


@dataclass
class InFlight:
    deadline_ms: int
    reconsume: int
    serial: int

    def row(self, offset: int) -> list[int]:
        return [offset, self.deadline_ms, self.reconsume, self.serial]


@dataclass
class PopQueue:
    next: int
    inflight: dict[int, InFlight] = field(default_factory=dict)

    def committable(self) -> int:
        return min(self.inflight) if self.inflight else self.next


class PopState:
    """The in-flight tables and their journal. Event-loop thread only (``sync`` may run in an executor)."""

    def __init__(self, config_dir: Path, sync_each: bool = False) -> None:
        self.dir = config_dir
        self.sync_each = sync_each  # SYNC_FLUSH: callers fsync (``sync``) before answering
        self.queues: dict[QueueKey, PopQueue] = {}
        self.max_reconsume: dict[str, int] = {}
        self.serial = 0
        self.inflight_by_group: Counter[str] = Counter()
        self._fd: int | None = None
        self._journal_bytes = 0
        self._snapshot_bytes = 0
        self._dirty = False

    @property
    def snapshot_path(self) -> Path:
        return self.dir / SNAPSHOT_FILE

    @property
    def journal_path(self) -> Path:
        return self.dir / JOURNAL_FILE

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    def time_serial(self, now_ms: int) -> int:
        """A serial that is also a ``popTime``: at least ``now_ms``, above every earlier serial (invariant 3)."""
        self.serial = max(self.serial, now_ms - 1)
        return self.next_serial()

    # ------------------------------------------------------------------ changes
    def hand_out(self, key: QueueKey, pq: PopQueue, offsets: list[int], max_reconsume: int) -> None:
        """Journal that ``offsets`` of ``key`` are in flight as ``pq.inflight`` says now (new, redelivered, or
        with a new deadline), with ``pq.next``."""
        group, topic, queue_id = key
        self.max_reconsume[group] = max_reconsume
        self._append({"k": "h", "g": group, "t": topic, "q": queue_id, "n": pq.next, "m": max_reconsume,
                      "o": [pq.inflight[o].row(o) for o in offsets]})

    def add(self, key: QueueKey, pq: PopQueue, offset: int, fl: InFlight) -> None:
        """Put ``offset`` in flight (journaled by the :meth:`hand_out` that follows)."""
        if offset not in pq.inflight:
            self.inflight_by_group[key[0]] += 1
        pq.inflight[offset] = fl

    def finish(self, key: QueueKey, pq: PopQueue, offsets: list[int]) -> None:
        """Remove ``offsets`` from flight and journal it (acked, dead-lettered, or gone from the store)."""
        done = [o for o in offsets if pq.inflight.pop(o, None) is not None]
        if not done:
            return
        self.inflight_by_group[key[0]] -= len(done)
        group, topic, queue_id = key
        self._append({"k": "d", "g": group, "t": topic, "q": queue_id, "o": done})

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        if self._fd is None:
            self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]
        self._journal_bytes += len(line)
        self._dirty = True

    def sync(self) -> None:
        """fsync the journal (the broker's one-second tick; before each answer with SYNC_FLUSH)."""
        fd = self._fd
        if fd is not None and self._dirty:
            self._dirty = False
            os.fsync(fd)

    def maybe_compact(self) -> bool:
        if self._journal_bytes <= max(COMPACT_MIN_BYTES, 4 * self._snapshot_bytes):
            return False
        self.compact()
        return True

    # ------------------------------------------------------------------ snapshot, load
    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "serial": self.serial, "maxReconsume": dict(sorted(self.max_reconsume.items())),
                "queues": [{"group": g, "topic": t, "queueId": q, "next": pq.next,
                            "inflight": [fl.row(o) for o, fl in sorted(pq.inflight.items())]}
                           for (g, t, q), pq in sorted(self.queues.items())]}

    def compact(self) -> None:
        """Write the snapshot (fsync, rename, directory fsync), then empty the journal (invariant 2)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_json(), separators=(",", ":"))
        write_config_file(self.snapshot_path, text)
        self._snapshot_bytes = len(text)
        if self._fd is None:
            self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, 0)
        os.fsync(self._fd)
        self._journal_bytes = 0
        self._dirty = False

    def load(self) -> None:
        """Read the snapshot, replay the journal over it, then compact (drops a torn tail)."""
        doc = read_config_file(self.snapshot_path)
        if isinstance(doc, dict):
            self.serial = int(doc.get("serial", 0))
            self.max_reconsume = {str(g): int(n) for g, n in dict(doc.get("maxReconsume") or {}).items()}
            for q in doc.get("queues") or []:
                key = (str(q["group"]), str(q["topic"]), int(q["queueId"]))
                self._apply_handed(key, int(q["next"]), q["inflight"])
        replayed = 0
        try:
            raw = self.journal_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        for n, line in enumerate(raw.split(b"\n")):
            if not line:
                continue
            try:
                rec = json.loads(line)
                key = (str(rec["g"]), str(rec["t"]), int(rec["q"]))
                if rec["k"] == "h":
                    self.max_reconsume[key[0]] = int(rec["m"])
                    self._apply_handed(key, int(rec["n"]), rec["o"])
                elif rec["k"] == "d":
                    pq = self.queues.get(key)
                    for o in rec["o"]:
                        if pq is not None and pq.inflight.pop(int(o), None) is not None:
                            self.inflight_by_group[key[0]] -= 1
                else:
                    raise ValueError(f"unknown record kind {rec['k']!r}")
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                log.warning("%s: line %d is torn or unreadable (%s); replay stops there", self.journal_path, n + 1,
                            exc)
                break
            replayed += 1
        inflight = sum(len(pq.inflight) for pq in self.queues.values())
        log.info("receive/ack state: %d queues, %d messages in flight (%d journal records replayed)",
                 len(self.queues), inflight, replayed)
        self.compact()

    def _apply_handed(self, key: QueueKey, next_offset: int, rows: list[list[int]]) -> None:
        pq = self.queues.get(key)
        if pq is None:
            pq = self.queues[key] = PopQueue(next_offset)
        pq.next = max(pq.next, next_offset)
        for offset, deadline_ms, reconsume, serial in rows:
            self.add(key, pq, int(offset), InFlight(int(deadline_ms), int(reconsume), int(serial)))
            self.serial = max(self.serial, int(serial))

    def close(self) -> None:
        """Compact (a clean shutdown leaves only the snapshot) and close the journal."""
        try:
            self.compact()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
