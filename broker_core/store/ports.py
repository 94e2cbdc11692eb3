"""What the store's services see of the store: :class:`StoreParts`, a ``typing.Protocol``.

``MessageStore`` (message_store.py) builds the services (flush, dispatch, retention, delayed delivery,
recovery, rebuild, quarantine, truncation) and hands itself over as their ``StoreParts``; the services import
this module, never ``message_store`` (an import-linter contract), so the facade sits above them and the import
graph has no circle through it. The parts typed here (CommitLog, ConsumeQueue, IndexService, checkpoint...)
are the store's own lower modules; the dispatcher and the delay service, which take ``StoreParts`` themselves,
appear as the narrow protocols of what the others call on them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker_core.codec.message import MessageRecord
    from broker_core.config import StoreConfig
    from broker_core.store.checkpoint import StoreCheckpoint
    from broker_core.store.clock import Clock
    from broker_core.store.commit_log import CommitLog
    from broker_core.store.consume_queue import ConsumeQueue
    from broker_core.store.durability import FlushFailure
    from broker_core.store.index_file import IndexService
    from broker_core.store.message import MessageInner
    from broker_core.store.results import PutMessageResult, QueryMessageResult


class Dispatching(Protocol):
    """The dispatcher (dispatcher.py ``ReputMessageService``) as recovery and truncation drive it."""

    reput_from_offset: int
    _lock: threading.Lock  # held by truncation (truncate.py) while it cuts, so no dispatch runs meanwhile

    def do_reput(self) -> bool: ...


class DelayLevels(Protocol):
    """Delayed delivery (schedule.py ``ScheduleMessageService``) as recovery loads it and dispatch reads it."""

    def load(self) -> None: ...

    def delay_ms(self, level: int) -> int: ...


class StoreParts(Protocol):
    """The store as its services use it (``MessageStore`` implements it)."""

    checkpoint: StoreCheckpoint  # opened (replaced) by recovery
    consume_queue_table: dict[tuple[str, int], ConsumeQueue]
    index_service: IndexService | None
    last_exit_ok: bool
    quarantined: list[str]

    @property
    def store_config(self) -> StoreConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def commit_log(self) -> CommitLog: ...

    @property
    def flush_failure(self) -> FlushFailure: ...

    @property
    def reput(self) -> Dispatching: ...

    @property
    def schedule(self) -> DelayLevels: ...

    @property
    def last_dispatched_timestamp(self) -> int: ...

    def consume_queues(self) -> Iterator[ConsumeQueue]: ...

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...

    def destroy_logics(self) -> None: ...

    def look_message_by_offset(self, phy_offset: int) -> MessageRecord | None: ...

    def dispatch(self, timeout: float = 5.0) -> bool: ...

    def put_delivered(self, msg: MessageInner) -> PutMessageResult: ...

    def query_message(self, topic: str, key: str, max_num: int | None = None, begin_ms: int = 0,
                      end_ms: int = ...) -> QueryMessageResult: ...
