"""A pushed queue's pulled-but-unconsumed messages, and the listener type."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.client.message import ConsumeStatus, MessageExt, MessageQueue


@dataclass
class ProcessQueue:
    """Messages of one queue pulled and not yet consumed (offset -> message)."""

    mq: MessageQueue
    next_offset: int
    msgs: dict[int, MessageExt] = field(default_factory=dict)
    dropped: bool = False
    task: asyncio.Task[None] | None = None
    last_committed: int = -1  # what this consumer last told the broker (never re-send a value it had)
    locked: bool = False  # orderly: this consumer holds the broker's lock on the queue
    worker: asyncio.Task[None] | None = None  # orderly: the one task consuming this queue in order

    def committable(self) -> int:
        return min(self.msgs) if self.msgs else self.next_offset

    def span(self) -> int:
        return max(self.msgs) - min(self.msgs) if self.msgs else 0


Listener = Callable[[list[MessageExt]], ConsumeStatus | None]
