"""Result enums and records of the store's hot paths (expected outcomes, not exceptions)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from broker_core.codec.batch_append import offset_msg_ids
from broker_core.codec.message import MessageRecord


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    # an fsync failed (durability.py): the put was not made durable, or was refused because an earlier one failed
    FLUSH_DISK_FAILED = "FLUSH_DISK_FAILED"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # SYNC_MASTER: no slave acknowledged the bytes in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # SYNC_MASTER: no slave connected, or every one too far behind
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class Releasable(Protocol):
    def release(self) -> None: ...


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutMessageResult:
    """Outcome of one put. ``msg_id`` (the offset message id) is computed on demand."""

    __slots__ = ("error", "phy_offset", "queue_offset", "size", "status", "store_host", "store_port", "store_timestamp")
    # A promise to the C put loop (codec/_native_c/message_append.c, append_messages): calling the class with its
    # first seven arguments sets exactly these slots, in this order, and ``error`` to "", so the loop may fill them
    # directly.
    # Change __init__ and this together (tests/unit/codec/test_native_put.py holds both ways equal).
    __native_slots__ = ("status", "phy_offset", "size", "queue_offset", "store_timestamp", "store_host", "store_port",
                        "error")

    def __init__(
        self,
        status: PutStatus,
        phy_offset: int = -1,
        size: int = 0,
        queue_offset: int = -1,
        store_timestamp: int = 0,
        host: bytes = b"\x00\x00\x00\x00",
        port: int = 0,
        error: str = "",
    ) -> None:
        self.status = status
        self.phy_offset = phy_offset
        self.size = size
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp
        self.store_host = host
        self.store_port = port
        self.error = error

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def msg_id(self) -> str:
        return offset_msg_ids(self.store_host, self.store_port, (self.phy_offset,)) if self.phy_offset >= 0 else ""

    @property
    def next_offset(self) -> int:
        return self.phy_offset + self.size

    def __repr__(self) -> str:
        extra = f", error={self.error!r}" if self.error else ""
        return (f"PutMessageResult({self.status.name}, phy_offset={self.phy_offset}, size={self.size}, "
                f"queue_offset={self.queue_offset}{extra})")


def batch_end(results: list[PutMessageResult]) -> int:
    """Where the stored records of one put end (the largest next offset of the OK results), -1 if none is OK."""
    if results:
        last = results[-1]  # all stored, the common case: the last ends them (one lock hold appends in order)
        if last.status is PutStatus.PUT_OK:
            return last.phy_offset + last.size
    return max((r.next_offset for r in results if r.ok), default=-1)


@dataclass(slots=True)
class BatchPutResult:
    """Outcome of a batch put (:meth:`MessageStore.put_batch_nowait`): the records written, in order. A refused
    batch wrote nothing (``phys`` empty); ``CREATE_MAPEDFILE_FAILED`` may follow some written records."""

    status: PutStatus
    phys: list[int] = field(default_factory=list)  # CommitLog offset of each record written
    first_queue_offset: int = -1
    end_offset: int = -1  # CommitLog offset after the last record written
    host: bytes = b"\x00\x00\x00\x00"
    port: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def msg_ids(self) -> str:
        """The offset message ids of the records written, joined by commas (the send response's ``msgId``)."""
        return offset_msg_ids(self.host, self.port, self.phys)


@dataclass
class GetMessageResult:
    """Outcome of a pull from one queue: messages found and where the next pull starts."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageRecord] = field(default_factory=list)
    # With ``decode=False``: the record bytes instead, as whole runs of adjacent records (their concatenation is
    # the pull body); ``messages`` stays empty.
    chunks: list[bytes] = field(default_factory=list)  # memoryviews with ``views=True``
    # Queue offsets of the messages (decoded or in ``chunks``), in order.
    queue_offsets: list[int] = field(default_factory=list)
    error: str = ""
    # With ``views=True``: ``chunks`` are memoryviews of the mapped CommitLog (no copy) and these hold their
    # segments; :meth:`release` once the bytes are written (views stay valid after: see MappedFile._cleanup).
    holds: list[Releasable] = field(default_factory=list)

    def release(self) -> None:
        """Release the segments the views came from (idempotent)."""
        holds, self.holds = self.holds, []
        for h in holds:
            h.release()


@dataclass
class QueryMessageResult:
    """Outcome of a key query: the matching messages, newest first, and whether the cap cut the list."""

    messages: list[MessageRecord]
    truncated: bool
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0
