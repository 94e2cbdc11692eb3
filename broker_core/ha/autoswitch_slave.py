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
from broker_core.remoting.loops import within
from broker_core.store import ReplicaError, split_whole_records
from broker_core.store.epoch_file import EpochEntry, find_consistent_point

if TYPE_CHECKING:
    from broker_core.config import BrokerConfig
    from broker_core.store import MessageStore
    from broker_core.store.epoch_file import EpochFile

log = logging.getLogger(__name__)

RETRY_S = 2.0
_READ_BYTES = 256 * 1024


class HandshakeRefused(ConnectionError):
    """The master's handshake cannot be followed (an older epoch, no consistent point, a failed cut)."""


class AutoSwitchHAClient:
    def __init__(self, store: MessageStore, config: BrokerConfig, epochs: EpochFile, broker_id: int,
                 master_ha_addr: Callable[[], str], min_master_epoch: Callable[[], int]) -> None:
        self.store = store
        self.config = config
        self.epochs = epochs
        self.broker_id = broker_id
        self.master_ha_addr = master_ha_addr
        self.min_master_epoch = min_master_epoch
        self.connected_to = ""
        self.confirm_offset = -1
        self.master_offset = -1
        self.truncations = 0
        self.last_read_ms = 0
        self._task: asyncio.Task[None] | None = None
        self._addr_changed = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def address_changed(self) -> None:
        self._addr_changed.set()

    async def _run(self) -> None:
        while True:
            addr = self.master_ha_addr()
            if addr:
                try:
                    await self._session(addr)
                except (ConnectionError, OSError, TimeoutError, ValueError, ReplicaError, HAWireError) as exc:
                    log.warning("autoswitch HA to master %s: %s", addr, exc)
                finally:
                    self.connected_to = ""
            self._addr_changed.clear()
            try:
                await within(self._addr_changed.wait(), RETRY_S if addr else 0.5)
            except TimeoutError:
                pass

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await within(asyncio.open_connection(host, int(port)), 3.0)
        cfg = self.config
        heartbeat_s = cfg.ha.ha_send_heartbeat_interval_ms / 1000
        housekeeping_ms = cfg.ha.ha_housekeeping_interval_ms
        segment = cfg.store.mapped_file_size_commit_log_bytes
        frames = MasterFrameReader()
        partial = b""
        handshaken = False
        try:
            writer.write(encode_slave_handshake(self.broker_id, cfg.controller.sync_from_last_file,
                                                cfg.controller.async_learner))
            await writer.drain()
            self.last_read_ms = _now_ms()
            last_ack = 0.0
            while True:
                if self.master_ha_addr() != addr:
                    log.info("HA master moved from %s to %s", addr, self.master_ha_addr())
                    return
                try:
                    data = await within(reader.read(_READ_BYTES), min(heartbeat_s, 1.0))
                except TimeoutError:
                    data = None
                if data == b"":
                    raise ConnectionError("the master closed the HA connection")
                if data:
                    self.last_read_ms = _now_ms()
                    for frame in frames.feed(data):
                        if isinstance(frame, MasterHandshake):
                            await self._handshake(frame)
                            handshaken = True
                            self.connected_to = addr
                            writer.write(encode_slave_ack(self.store.max_phy_offset()))
                            last_ack = time.monotonic()
                        elif isinstance(frame, Transfer):
                            if not handshaken:
                                raise HAWireError("a transfer before the handshake")
                            partial = self._apply(frame, partial, segment)
                elif _now_ms() - self.last_read_ms > housekeeping_ms:
                    raise TimeoutError(f"nothing from the master for {housekeeping_ms} ms")
                if handshaken and (data or time.monotonic() - last_ack >= heartbeat_s):
                    writer.write(encode_slave_ack(self.store.max_phy_offset()))
                    last_ack = time.monotonic()
                    await writer.drain()
        finally:
            writer.close()

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

    def _apply(self, t: Transfer, partial: bytes, segment: int) -> bytes:
        end = self.store.max_phy_offset()
        expected = end + len(partial)
        self.master_offset = t.offset + len(t.body)
        if t.body and (end != 0 or partial) and t.offset != expected:
            raise ReplicaError(f"master sent offset {t.offset}, this slave expects {expected}")
        if t.body:
            last = self.epochs.last()
            if last is None or t.epoch > last.epoch:
                if not self.epochs.append_after_empty(t.epoch, t.epoch_start_offset):
                    raise ReplicaError(f"cannot append epoch {t.epoch} at {t.epoch_start_offset} after {last}")
            data = partial + t.body if partial else t.body
            start = t.offset - len(partial)
            view = memoryview(data)
            done = 0
            while whole := split_whole_records(view[done:], start + done, segment):
                self.store.append_replicated(start + done, view[done:done + whole])
                done += whole
            partial = bytes(view[done:])
        confirm = min(t.confirm_offset, self.store.max_phy_offset())
        if confirm > self.confirm_offset:
            self.confirm_offset = confirm
            self.store.dispatch_more()  # the store consumes only below the confirm offset
        return partial

    def info(self) -> dict[str, object]:
        end = self.store.max_phy_offset()
        return {"haMasterAddr": self.master_ha_addr(), "haConnected": bool(self.connected_to),
                "haSlaveOffset": end, "haMasterOffset": self.master_offset,
                "haSlaveLagBytes": max(0, self.master_offset - end) if self.master_offset >= 0 else -1,
                "confirmOffset": self.confirm_offset, "haTruncations": self.truncations}


def _now_ms() -> int:
    return int(time.time() * 1000)
