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
import time
from typing import TYPE_CHECKING

from broker_core.ha.autoswitch_wire import (
    HAWireError,
    SlaveAck,
    SlaveFrameReader,
    SlaveHandshake,
    encode_master_handshake,
    encode_transfer,
)
from broker_core.remoting.loops import within

if TYPE_CHECKING:
    from broker_core.ha.autoswitch_master import AutoSwitchHAService

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.1
_READ_BYTES = 64 * 1024


def now_ms() -> int:
    return int(time.time() * 1000)


class AutoSwitchHAConnection:
    def __init__(self, service: AutoSwitchHAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.slave_id = -1
        self.async_learner = False
        self.sync_from_last_file = False
        self.ack_offset = -1
        self.next_transfer_from = -1
        self.max_at_last_send = 0
        self.caught_up_ms = 0
        self.last_read_ms = now_ms()
        self.last_write_ms = 0
        self.wake = asyncio.Event()
        self.closed = False

    async def serve(self) -> None:
        writer_task = asyncio.ensure_future(self._write_loop())
        try:
            await self._read_loop()
        finally:
            writer_task.cancel()
            await asyncio.gather(writer_task, return_exceptions=True)
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()
            self.service.connection_closed(self)

    async def _read_loop(self) -> None:
        cfg = self.service.config.ha
        reader = SlaveFrameReader()
        while True:
            try:
                data = await within(self.reader.read(_READ_BYTES), cfg.ha_housekeeping_interval_ms / 1000)
            except TimeoutError:
                log.warning("HA slave %s silent for %d ms; closing", self.remote, cfg.ha_housekeeping_interval_ms)
                return
            except (ConnectionError, OSError):
                return
            if not data:
                return
            self.last_read_ms = now_ms()
            try:
                frames = reader.feed(data)
            except HAWireError as exc:
                log.error("HA slave %s: %s; closing", self.remote, exc)
                return
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
                        return

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
                if self.sync_from_last_file:
                    end = store.max_phy_offset()
                    offset = max(0, end - end % self.service.config.store.mapped_file_size_commit_log_bytes)
                else:
                    offset = max(0, store.min_phy_offset())
            self.next_transfer_from = offset
            log.info("HA transfer to slave %d (%s) starts at %d", self.slave_id, self.remote, offset)
            self.wake.set()
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

    async def _write_loop(self) -> None:
        service = self.service
        store = service.store
        heartbeat_ms = service.config.ha.ha_send_heartbeat_interval_ms
        while self.next_transfer_from < 0:
            self.wake.clear()
            await self.wake.wait()
        try:
            while True:
                self.wake.clear()
                offset = self.next_transfer_from
                epoch, epoch_start, limit = self._batch_bounds(offset)
                data = store.get_commit_log_data(offset, limit) if limit > 0 else None
                now = now_ms()
                if data:
                    self.max_at_last_send = store.max_phy_offset()
                    self.writer.write(encode_transfer(offset, epoch, epoch_start, service.confirm(), data))
                    self.next_transfer_from += len(data)
                    self.last_write_ms = now
                    await self.writer.drain()
                    continue
                if now - self.last_write_ms > heartbeat_ms:
                    self.max_at_last_send = store.max_phy_offset()
                    self.writer.write(encode_transfer(offset, epoch, epoch_start, service.confirm()))
                    self.last_write_ms = now
                    await self.writer.drain()
                try:
                    await within(self.wake.wait(), _IDLE_WAIT_S)
                except TimeoutError:
                    pass
        except (ConnectionError, OSError) as exc:
            log.info("HA transfer to %s stopped: %s", self.remote, exc)
            self.writer.close()

    def info(self, master_offset: int) -> dict[str, object]:
        lag = max(0, master_offset - max(self.ack_offset, 0))
        return {"remote": self.remote, "brokerId": self.slave_id, "ackOffset": self.ack_offset, "lagBytes": lag,
                "asyncLearner": self.async_learner, "caughtUpMs": self.caught_up_ms}
