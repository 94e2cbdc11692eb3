"""Injectable clocks. The store reads time only through a :class:`Clock` so tests control it."""

from __future__ import annotations

import time


class Clock:
    """Wall clock in milliseconds and seconds, and a sleep.

    ``wall_offset``: this clock reads the wall clock (``time.time_ns() // 1_000_000``) plus this many ms, or None
    when it keeps a time of its own (the C put reads the wall clock itself when it is not None). A subclass that
    defines ``now_ms`` without declaring ``wall_offset`` gets None."""

    wall_offset: int | None = 0

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "now_ms" in cls.__dict__ and "wall_offset" not in cls.__dict__:
            cls.wall_offset = None

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
    """The wall clock shifted by an offset (``clockOffsetMs``, which UPDATE_BROKER_CONFIG may change while the
    broker runs): a broker can rehearse 04:00 at noon."""

    wall_offset: int = 0  # this instance's offset (``offset_ms``, below)

    def __init__(self, offset_ms: int) -> None:
        self.wall_offset = offset_ms

    @property
    def offset_ms(self) -> int:
        return self.wall_offset

    @offset_ms.setter
    def offset_ms(self, value: int) -> None:
        self.wall_offset = value

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.wall_offset


SYSTEM_CLOCK = Clock()
