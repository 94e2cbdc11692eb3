"""One slave's connection to an autoswitch HA master (RocketMQ 5 ``AutoSwitchHAConnection``, reference
``rocketmq-controller.md`` §4.4); the service that owns it is ``autoswitch_master.AutoSwitchHAService``.

- Read side: the slave's HANDSHAKE (its controller id, syncFromLastFile, asyncLearner) is answered with the
  master's epoch entries and CommitLog end; each ack is the slave's acknowledged offset, the first one also its
  start point (0: the CommitLog's min offset, or the start of the last file with syncFromLastFile). An ack past
  the master's end closes the connection.
- Write side: batches of at most ``haTransferBatchSize`` that never cross an epoch boundary, each with its epoch,
  the epoch's start offset and the confirm offset; a header alone after ``haSendHeartbeatInterval`` idle.
- Caught-up time: an ack at or past the master's end as of the last batch (or heartbeat) sent.
- Either side: closed after ``haHousekeepingInterval`` without hearing from the slave.

Invariant: bytes go in CommitLog order, each batch inside one epoch's range. Crash behaviour: nothing persisted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker_core.ha.autoswitch_wire import (
    HAWireError,
    SlaveAck,
    SlaveFrameReader,
    SlaveHandshake,
    encode_master_handshake,
    encode_transfer,
)
from broker_core.ha.transfer import SlaveConnection, last_file_start, now_ms

if TYPE_CHECKING:
    from broker_core.ha.autoswitch_master import AutoSwitchHAService

log = logging.getLogger(__name__)


class AutoSwitchHAConnection(SlaveConnection):
    def __init__(self, service: AutoSwitchHAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        super().__init__(reader, writer, service.config.ha)
        self.service = service
        self.slave_id = -1
        self.async_learner = False
        self.sync_from_last_file = False
        self.ack_offset = -1
        self.max_at_last_send = 0
        self.caught_up_ms = 0
        self._frames = SlaveFrameReader()
        self._batch = (0, 0)  # (epoch, epoch start) of the batch read last

    def closing(self) -> None:
        self.service.connection_closed(self)

    def on_data(self, data: bytes) -> bool:
        try:
            frames = self._frames.feed(data)
        except HAWireError as exc:
            log.error("HA slave %s: %s; closing", self.remote, exc)
            return False
        for frame in frames:
            if isinstance(frame, SlaveHandshake):
                self.slave_id = frame.slave_broker_id
                self.async_learner = frame.async_learner
                self.sync_from_last_file = frame.sync_from_last_file
                entries = [(e.epoch, e.start_offset) for e in self.service.epochs.entries()]
                self.writer.write(encode_master_handshake(self.service.store.max_phy_offset(), entries))
                log.info("HA handshake from slave %s (broker id %d)", self.remote, self.slave_id)
            elif isinstance(frame, SlaveAck):
                if not self._ack(frame.max_phy_offset):
                    return False
        return True

    def _ack(self, offset: int) -> bool:
        store = self.service.store
        if offset > store.max_phy_offset():
            log.error("HA slave %s acks %d past this master's end %d; closing", self.remote, offset,
                      store.max_phy_offset())
            return False
        first = self.ack_offset < 0 and self.next_transfer_from < 0
        self.ack_offset = offset
        if not self.async_learner and offset >= self.max_at_last_send:
            self.caught_up_ms = now_ms()
        if first:
            if offset == 0:
                offset = last_file_start(store) if self.sync_from_last_file else max(0, store.min_phy_offset())
            log.info("HA transfer to slave %d (%s) starts at %d", self.slave_id, self.remote, offset)
            self.start_transfer(offset)
        self.service.acked(self)
        return True

    def _batch_bounds(self, offset: int) -> tuple[int, int, int]:
        """(epoch, epoch start, byte limit) for a batch from ``offset``: never past the next epoch's start."""
        epochs = self.service.epochs
        entry = epochs.entry_at(offset)
        entries = epochs.entries()
        if entry is None:
            entry = entries[0] if entries else None
        if entry is None:
            return 0, 0, self.service.config.ha.ha_transfer_batch_size
        limit = self.service.config.ha.ha_transfer_batch_size
        nxt = epochs.next_after(entry.epoch)
        if nxt is not None:
            limit = min(limit, nxt.start_offset - offset)
        return entry.epoch, entry.start_offset, limit

    def read_batch(self, offset: int) -> bytes | None:
        epoch, epoch_start, limit = self._batch_bounds(offset)
        self._batch = (epoch, epoch_start)
        return self.service.store.get_commit_log_data(offset, limit) if limit > 0 else None

    def frame(self, offset: int, body: bytes, now: int) -> bytes:
        """The batch read last (or a heartbeat) with its epoch and the confirm offset as of now."""
        self.max_at_last_send = self.service.store.max_phy_offset()
        epoch, epoch_start = self._batch
        return encode_transfer(offset, epoch, epoch_start, self.service.confirm(), body)

    def info(self, master_offset: int) -> dict[str, object]:
        lag = max(0, master_offset - max(self.ack_offset, 0))
        return {"remote": self.remote, "brokerId": self.slave_id, "ackOffset": self.ack_offset, "lagBytes": lag,
                "asyncLearner": self.async_learner, "caughtUpMs": self.caught_up_ms}
