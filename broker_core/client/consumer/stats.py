"""A consumer's rates as RocketMQ's ``ConsumerStatsManager`` reports them in ``ConsumeStatus`` (the
``statusTable`` of GET_CONSUMER_RUNNING_INFO), per topic: pull RT (ms per pull that found messages) and pull TPS
(messages per second), consume RT (ms per listener call), OK and failed TPS, over the last minute; and the failed
messages of the last hour.

Thread-safe: pulls are counted on the client loop, listener calls on the consume pool's threads. Events older than
an hour are dropped as new ones arrive, so memory stays bounded by the hour's event count per topic.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

MINUTE_S = 60.0
HOUR_S = 3600.0


class ConsumerStats:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        # topic -> deque of (time, kind, rt_ms, count); kind: "pull", "ok", "failed"
        self._events: dict[str, deque[tuple[float, str, float, int]]] = {}

    def _add(self, topic: str, kind: str, rt_ms: float, count: int) -> None:
        now = self.clock()
        with self._lock:
            events = self._events.setdefault(topic, deque())
            events.append((now, kind, rt_ms, count))
            while events and events[0][0] < now - HOUR_S:
                events.popleft()

    def pulled(self, topic: str, rt_ms: float, count: int) -> None:
        self._add(topic, "pull", rt_ms, count)

    def consumed(self, topic: str, rt_ms: float, count: int, ok: bool) -> None:
        self._add(topic, "ok" if ok else "failed", rt_ms, count)

    def consume_status(self, topic: str) -> dict[str, float | int]:
        """RocketMQ's ``ConsumeStatus`` of ``topic``: ``pullRT, pullTPS, consumeRT, consumeOKTPS,
        consumeFailedTPS`` over the last minute, ``consumeFailedMsgs`` over the last hour."""
        now = self.clock()
        with self._lock:
            events = list(self._events.get(topic, ()))
        minute = [e for e in events if e[0] >= now - MINUTE_S]
        pulls = [e for e in minute if e[1] == "pull"]
        calls = [e for e in minute if e[1] != "pull"]

        def avg(rows: list[tuple[float, str, float, int]]) -> float:
            return sum(r[2] for r in rows) / len(rows) if rows else 0.0

        def tps(kind: str) -> float:
            return sum(e[3] for e in minute if e[1] == kind) / MINUTE_S

        return {"pullRT": avg(pulls), "pullTPS": tps("pull"), "consumeRT": avg(calls), "consumeOKTPS": tps("ok"),
                "consumeFailedTPS": tps("failed"),
                "consumeFailedMsgs": sum(e[3] for e in events if e[1] == "failed" and e[0] >= now - HOUR_S)}
