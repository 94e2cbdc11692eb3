"""The master side of HA: ``HAService`` listens on ``haListenPort``; each slave gets an ``HAConnection``.

Per connection (upstream ``HAConnection``):
- the read side takes the slave's offset reports (``wire.take_last_report``). The first one is the slave's
  request offset; each one is its acknowledged offset (``slave_ack_offset``) and raises the service's
  ``push2slave_max_offset``. A report past the master's CommitLog end closes the connection.
- the write side waits for the first report, then streams: from the request offset, or, when the slave
  reports 0 (an empty store), from the start of the master's last CommitLog segment. Each chunk is at most
  ``haTransferBatchSize`` bytes and never past the written part of its segment, sent with the 12-byte
  transfer header. With nothing to send for ``haSendHeartbeatInterval`` it sends the header alone.
- either side drops the connection after ``haHousekeepingInterval`` without hearing from the slave.

SYNC_MASTER (upstream ``GroupTransferService``): :meth:`HAService.wait_replicated` answers PUT_OK once a slave
acknowledged the offset, FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``, and SLAVE_NOT_AVAILABLE at once when no
slave is connected or every one is more than ``haSlaveFallbehindMax`` behind.

Invariants:
1. ``push2slave_max_offset`` only grows (a reconnecting slave reporting less does not lower it): a put
   acknowledged as replicated stays acknowledged.
2. Bytes go to a slave in CommitLog order without gaps: each chunk starts where the previous one ended.
3. Everything runs on the broker's event loop; the only cross-thread call is :meth:`HAService.notify`.

Crash behaviour: nothing is persisted here. A restarted master starts with no slaves and
``push2slave_max_offset`` 0; slaves reconnect and report their offsets, and the master resumes from them.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
from typing import TYPE_CHECKING

from broker_core.ha.transfer import HAListener, SlaveConnection, last_file_start, now_ms
from broker_core.ha.wire import encode_transfer, take_last_report
from broker_core.remoting.loops import within
from broker_core.store import PutStatus

if TYPE_CHECKING:
    from broker_core.config import HaConfig
    from broker_core.store import MessageStore

log = logging.getLogger(__name__)


class HAConnection(SlaveConnection):
    def __init__(self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__(reader, writer, service.config)
        self.service = service
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.last_transfer_ms = 0  # when data (not a heartbeat) was last sent
        self.caught_up_ms = now_ms()  # when an ack last reached the master's CommitLog end
        self._pending = bytearray()

    def closing(self) -> None:
        self.service.connections.discard(self)
        log.info("HA connection from slave %s closed (acked %d)", self.remote, self.slave_ack_offset)

    def on_data(self, data: bytes) -> bool:
        self._pending += data
        offset = take_last_report(self._pending)
        if offset is None:
            return True
        store = self.service.store
        if offset > store.max_phy_offset():
            log.error("HA slave %s reports offset %d past this master's CommitLog end %d; closing", self.remote,
                      offset, store.max_phy_offset())
            return False
        self.slave_ack_offset = offset
        if offset >= store.max_phy_offset():
            self.caught_up_ms = self.last_read_ms
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            log.info("HA slave %s asks for the CommitLog from %d", self.remote, offset)
            start = last_file_start(store) if offset == 0 else offset
            log.info("HA transfer to %s starts at %d", self.remote, start)
            self.start_transfer(start)
        self.service.acknowledged(offset)
        return True

    def read_batch(self, offset: int) -> bytes | None:
        return self.service.store.get_commit_log_data(offset, self.ha.ha_transfer_batch_size)

    def frame(self, offset: int, body: bytes, now: int) -> bytes:
        if body:
            self.last_transfer_ms = now
        return encode_transfer(offset, body)

    def info(self, master_offset: int) -> dict[str, object]:
        """``lagBytes``: the master's CommitLog end minus the slave's acknowledged offset; ``lagSeconds``: how long
        the slave has been behind (0 when caught up), measured from its last ack that reached the end."""
        lag = max(0, master_offset - max(self.slave_ack_offset, 0))
        behind_s = 0.0 if lag == 0 else max(0.0, (now_ms() - self.caught_up_ms) / 1000)
        return {"remote": self.remote, "ackOffset": self.slave_ack_offset, "lagBytes": lag,
                "lagSeconds": round(behind_s, 3), "lastReadMs": self.last_read_ms,
                "lastTransferMs": self.last_transfer_ms}


class HAService(HAListener[HAConnection]):
    """The master's HA listener, its connections, and the SYNC_MASTER waiters."""

    def __init__(self, store: MessageStore, config: HaConfig) -> None:
        super().__init__(store)
        self.config = config
        self.push2slave_max_offset = 0
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []  # heap by offset
        self._seq = itertools.count()

    def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> HAConnection:
        return HAConnection(self, reader, writer)

    async def close(self) -> None:
        await super().close()
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    # ------------------------------------------------------------------ SYNC_MASTER
    def acknowledged(self, offset: int) -> None:
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.push2slave_max_offset:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(True)

    def slave_ok(self, master_put_where: int) -> bool:
        """Upstream ``isSlaveOK``: a slave is connected and the acknowledged offset is within
        ``haSlaveFallbehindMax`` of ``master_put_where``."""
        return bool(self.connections) and (
            master_put_where - self.push2slave_max_offset < self.config.ha_slave_fallbehind_max_bytes)

    async def wait_replicated(self, next_offset: int) -> PutStatus:
        """SYNC_MASTER: whether a slave holds the CommitLog up to ``next_offset`` (the end of the put)."""
        if self.push2slave_max_offset >= next_offset:
            return PutStatus.PUT_OK
        if not self.slave_ok(next_offset):
            return PutStatus.SLAVE_NOT_AVAILABLE
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (next_offset, next(self._seq), fut))
        self._wake_all()
        try:
            ok = await within(fut, self.config.slave_timeout_ms / 1000)
        except TimeoutError:
            ok = False
        return PutStatus.PUT_OK if ok else PutStatus.FLUSH_SLAVE_TIMEOUT

    # ------------------------------------------------------------------ state
    def info(self) -> dict[str, object]:
        slaves = self.slaves_info(self.store.max_phy_offset())
        return {"haListenPort": self.port, "haConnections": len(slaves), "haPush2SlaveMaxOffset":
                self.push2slave_max_offset, "haSlaves": json.dumps(slaves, separators=(",", ":"))}
