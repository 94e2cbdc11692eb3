"""Broker-side queue locks for orderly consumption (upstream ``RebalanceLockManager``).

A consumer of an ordered topic consumes a queue only while it holds the broker's lock on it for its
group. Locks are taken and renewed in batches (LOCK_BATCH_MQ, every 20 s by the SDK) and released
explicitly (UNLOCK_BATCH_MQ), when the holder's connection closes, or by expiry ``lock_max_live_ms``
(60 s) after the last renewal, so a dead holder never blocks a queue for long.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

QueueKey = tuple[str, str, int]  # (topic, broker name, queue id)


@dataclass
class LockEntry:
    client_id: str
    last_update: float


class RebalanceLockManager:
    def __init__(self, lock_max_live_ms: int = 60_000) -> None:
        self.lock_max_live_s = lock_max_live_ms / 1000
        self.table: dict[str, dict[QueueKey, LockEntry]] = {}
        self._lock = threading.Lock()

    def _live(self, entry: LockEntry | None, now: float) -> bool:
        return entry is not None and now - entry.last_update <= self.lock_max_live_s

    def try_lock_batch(self, group: str, mqs: list[QueueKey], client_id: str) -> list[QueueKey]:
        now = time.monotonic()
        locked = []
        with self._lock:
            table = self.table.setdefault(group, {})
            for mq in mqs:
                entry = table.get(mq)
                if entry is None or not self._live(entry, now) or entry.client_id == client_id:
                    table[mq] = LockEntry(client_id, now)
                    locked.append(mq)
        return locked

    def unlock_batch(self, group: str, mqs: list[QueueKey], client_id: str) -> None:
        with self._lock:
            table = self.table.get(group, {})
            for mq in mqs:
                entry = table.get(mq)
                if entry is not None and entry.client_id == client_id:
                    del table[mq]

    def release_client(self, client_id: str) -> None:
        with self._lock:
            for table in self.table.values():
                for mq in [mq for mq, e in table.items() if e.client_id == client_id]:
                    del table[mq]

    def holder(self, group: str, mq: QueueKey) -> str | None:
        entry = self.table.get(group, {}).get(mq)
        return entry.client_id if entry is not None and self._live(entry, time.monotonic()) else None
