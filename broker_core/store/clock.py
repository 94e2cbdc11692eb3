"""Injectable clocks. The store reads time only through a :class:`Clock` so tests control it."""

from __future__ import annotations

import time


class Clock:
    """Wall clock in milliseconds and seconds, and a sleep."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock(Clock):
    """A clock that moves only when told to (tests). ``sleep`` advances it instead of waiting."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms

    def advance(self, ms: int) -> None:
        self._now += ms

    def sleep(self, seconds: float) -> None:
        self._now += int(seconds * 1000)


class OffsetClock(Clock):
    """The wall clock shifted by a fixed offset (``clockOffsetMs``): a broker can rehearse 04:00 at noon."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms


def wall_offset_ms(clock: Clock) -> int | None:
    """How far ``clock`` reads from the wall clock (``time.time_ns() // 1_000_000``) when it is exactly that plus
    a fixed offset (the C put reads the wall clock itself); None for any other clock."""
    if type(clock) is Clock:
        return 0
    if type(clock) is OffsetClock:
        return clock.offset_ms
    return None


SYSTEM_CLOCK = Clock()
