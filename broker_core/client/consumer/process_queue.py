"""A pushed queue's pulled-but-unconsumed messages, and the listener type."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.client.message import ConsumeStatus, MessageExt, MessageQueue


@dataclass
class ProcessQueue:
    """Messages of one queue pulled and not yet consumed (offset -> message). Change ``msgs`` only through
    :meth:`put`, :meth:`remove` and :meth:`clear`, which keep ``msg_size`` (the cached bodies' bytes, for
    ``pullThresholdSizeForQueue``) and ``consuming_since`` (for ``consumeTimeout``) true."""

    mq: MessageQueue
    next_offset: int
    msgs: dict[int, MessageExt] = field(default_factory=dict)
    msg_size: int = 0
    consuming_since: dict[int, float] = field(default_factory=dict)  # offset -> monotonic start of its listener
    dropped: bool = False
    task: asyncio.Task[None] | None = None
    last_committed: int = -1  # what this consumer last told the broker (never re-send a value it had)
    locked: bool = False  # orderly: this consumer holds the broker's lock on the queue
    worker: asyncio.Task[None] | None = None  # orderly: the one task consuming this queue in order
    # what GET_CONSUMER_RUNNING_INFO reports (RocketMQ's ProcessQueueInfo), epoch ms
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0
    last_lock_timestamp: int = 0

    def put(self, msg: MessageExt) -> None:
        if msg.queue_offset not in self.msgs:
            self.msg_size += len(msg.body)
        self.msgs[msg.queue_offset] = msg

    def remove(self, offset: int) -> MessageExt | None:
        msg = self.msgs.pop(offset, None)
        if msg is not None:
            self.msg_size -= len(msg.body)
        self.consuming_since.pop(offset, None)
        return msg

    def clear(self) -> None:
        self.msgs.clear()
        self.consuming_since.clear()
        self.msg_size = 0

    def committable(self) -> int:
        return min(self.msgs) if self.msgs else self.next_offset

    def span(self) -> int:
        return max(self.msgs) - min(self.msgs) if self.msgs else 0


Listener = Callable[[list[MessageExt]], ConsumeStatus | None]
