"""The slave side of autoswitch HA (RocketMQ 5 ``AutoSwitchHAClient``, reference ``rocketmq-controller.md`` §4.3,
§4.4): handshake with the controller id, truncate to the consistent point, then append the master's batches.

Session:
1. READY: the store holds whole records only (``split_whole_records`` on every append), so there is no torn tail
   to cut; connect and send the HANDSHAKE (16 B).
2. The master's HANDSHAKE lists its epochs and CommitLog end. A master whose last epoch is below the epoch the
   controller announced is refused (a deposed master still listening). With local epochs, the consistent point
   (``find_consistent_point``) is computed; no common epoch -> close, wait 2 s, retry. The store is cut there
   (``MessageStore.truncate_files``), then the epoch entries from the point on.
3. TRANSFER: ack the CommitLog end; every batch must start at this slave's end (plus a held partial record),
   else the connection closes; a batch of a newer epoch first appends ``(epoch, epochStartOffset)`` to the
   epoch file; the confirm offset becomes ``min(header, own end)``; ack after each batch and every
   ``haSendHeartbeatInterval``.

Invariants:
1. Bytes are appended only after the truncation of this session: nothing of an epoch the master does not hold
   at the same offsets survives below an appended byte.
2. An epoch entry is written before any byte of that epoch is appended.
3. The acked offset is the store's end: always a record boundary, always stored.

Crash behaviour: nothing of its own is persisted beyond the store and the epoch file; after a crash the next
session handshakes and truncates again (idempotent).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.ha.autoswitch_wire import (
    HAWireError,
    MasterFrameReader,
    MasterHandshake,
    Transfer,
    encode_slave_ack,
    encode_slave_handshake,
)
from broker_core.ha.replica import MasterLink
from broker_core.store import ReplicaError
from broker_core.store.epoch_file import EpochEntry, find_consistent_point

if TYPE_CHECKING:
    from broker_core.config import BrokerConfig
    from broker_core.store import MessageStore
    from broker_core.store.epoch_file import EpochFile

log = logging.getLogger(__name__)


class HandshakeRefused(ConnectionError):
    """The master's handshake cannot be followed (an older epoch, no consistent point, a failed cut)."""


class AutoSwitchHAClient(MasterLink):
    kind = "autoswitch HA"
    retry_s = 2.0
    idle_retry_s = 0.5
    max_read_wait_s = 1.0

    def __init__(self, store: MessageStore, config: BrokerConfig, epochs: EpochFile, broker_id: int,
                 master_ha_addr: Callable[[], str], min_master_epoch: Callable[[], int]) -> None:
        super().__init__(store, config.ha, master_ha_addr)
        self.config = config
        self.epochs = epochs
        self.broker_id = broker_id
        self.min_master_epoch = min_master_epoch
        self.confirm_offset = -1
        self.truncations = 0
        self._frames = MasterFrameReader()
        self._handshaken = False

    async def opened(self, addr: str, writer: asyncio.StreamWriter) -> None:
        self._frames = MasterFrameReader()
        self._handshaken = False
        ctl = self.config.controller
        writer.write(encode_slave_handshake(self.broker_id, ctl.sync_from_last_file, ctl.async_learner))
        await writer.drain()
        self.last_report = 0.0

    async def received(self, addr: str, data: bytes, writer: asyncio.StreamWriter) -> None:
        for frame in self._frames.feed(data):
            if isinstance(frame, MasterHandshake):
                await self._handshake(frame)
                self._handshaken = True
                self.connected_to = addr
                self.report(writer)
            elif isinstance(frame, Transfer):
                if not self._handshaken:
                    raise HAWireError("a transfer before the handshake")
                self._apply(frame)

    def report_due(self, got_data: bool, heartbeat_s: float) -> bool:
        return self._handshaken and (got_data or time.monotonic() - self.last_report >= heartbeat_s)

    def report(self, writer: asyncio.StreamWriter) -> None:
        writer.write(encode_slave_ack(self.store.max_phy_offset()))
        self.last_report = time.monotonic()

    async def _handshake(self, hs: MasterHandshake) -> None:
        expected = self.min_master_epoch()
        if hs.last_epoch < expected:
            raise HandshakeRefused(f"master's last epoch {hs.last_epoch} is below the announced {expected}")
        local = self.epochs.entries()
        self.master_offset = hs.master_max_offset
        if not local:
            return  # an empty epoch cache skips truncation (upstream)
        master = [EpochEntry(e, s) for e, s in hs.entries]
        master = [EpochEntry(e.epoch, e.start_offset, master[i + 1].start_offset if i + 1 < len(master)
                             else hs.master_max_offset) for i, e in enumerate(master)]
        local_max = self.store.max_phy_offset()
        point = find_consistent_point(local, local_max, master, hs.master_max_offset)
        if point < 0:
            raise HandshakeRefused("no epoch in common with the master")
        if point < local_max:
            ok = await asyncio.get_running_loop().run_in_executor(None, self.store.truncate_files, point)
            if not ok:
                raise HandshakeRefused(f"cannot truncate the CommitLog at {point}")
            self.truncations += 1
            log.warning("autoswitch HA: truncated from %d to the consistent point %d", local_max, point)
        self.epochs.truncate_suffix_from_offset(point)

    def _apply(self, t: Transfer) -> None:
        self.master_offset = t.offset + len(t.body)
        if t.body:
            self.check_continues(t.offset)
            last = self.epochs.last()
            if last is None or t.epoch > last.epoch:
                if not self.epochs.append_after_empty(t.epoch, t.epoch_start_offset):
                    raise ReplicaError(f"cannot append epoch {t.epoch} at {t.epoch_start_offset} after {last}")
            self.append(t.offset, t.body)
        confirm = min(t.confirm_offset, self.store.max_phy_offset())
        if confirm > self.confirm_offset:
            self.confirm_offset = confirm
            self.store.dispatch_more()  # the store consumes only below the confirm offset

    def info(self) -> dict[str, object]:
        return {**super().info(), "confirmOffset": self.confirm_offset, "haTruncations": self.truncations}
