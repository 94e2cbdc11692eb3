"""The broker's put/get counters and their per-second rates (runtime info, ``putTps``/``getTotalTps``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Stats:
    put_count: int = 0
    get_count: int = 0
    started: float = field(default_factory=time.monotonic)
    samples: list[tuple[float, int, int]] = field(default_factory=list)

    def sample(self) -> None:
        self.samples.append((time.monotonic(), self.put_count, self.get_count))
        del self.samples[:-7]

    def tps(self) -> tuple[float, float]:
        if len(self.samples) < 2:
            return 0.0, 0.0
        (t0, p0, g0), (t1, p1, g1) = self.samples[0], self.samples[-1]
        dt = max(t1 - t0, 1e-9)
        return (p1 - p0) / dt, (g1 - g0) / dt
