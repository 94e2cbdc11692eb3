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
import time
from typing import TYPE_CHECKING

from broker_core.ha.wire import encode_transfer, take_last_report
from broker_core.remoting.loops import within
from broker_core.store import PutStatus

if TYPE_CHECKING:
    from broker_core.config import HaConfig
    from broker_core.store import MessageStore

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.1  # upstream waits 100 ms for new data when a slave is up to date
_READ_BYTES = 64 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class HAConnection:
    def __init__(self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.last_read_ms = _now_ms()
        self.last_write_ms = 0
        self.last_transfer_ms = 0  # when data (not a heartbeat) was last sent
        self.caught_up_ms = _now_ms()  # when an ack last reached the master's CommitLog end
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
            self.service.connections.discard(self)
            log.info("HA connection from slave %s closed (acked %d)", self.remote, self.slave_ack_offset)

    async def _read_loop(self) -> None:
        cfg = self.service.config
        pending = bytearray()
        while True:
            try:
                data = await within(self.reader.read(_READ_BYTES), cfg.ha_housekeeping_interval_ms / 1000)
            except TimeoutError:
                log.warning("HA slave %s silent for %d ms; closing", self.remote, cfg.ha_housekeeping_interval_ms)
                return
            except (ConnectionError, OSError) as exc:
                log.info("HA slave %s: %s", self.remote, exc)
                return
            if not data:
                return
            self.last_read_ms = _now_ms()
            pending += data
            offset = take_last_report(pending)
            if offset is None:
                continue
            if offset > self.service.store.max_phy_offset():
                log.error("HA slave %s reports offset %d past this master's CommitLog end %d; closing", self.remote,
                          offset, self.service.store.max_phy_offset())
                return
            self.slave_ack_offset = offset
            if offset >= self.service.store.max_phy_offset():
                self.caught_up_ms = self.last_read_ms
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("HA slave %s asks for the CommitLog from %d", self.remote, offset)
                self.wake.set()
            self.service.acknowledged(offset)

    async def _write_loop(self) -> None:
        service = self.service
        store, cfg = service.store, service.config
        heartbeat_ms = cfg.ha_send_heartbeat_interval_ms
        while self.slave_request_offset < 0:
            self.wake.clear()
            await self.wake.wait()
        if self.slave_request_offset == 0:
            end = store.max_phy_offset()
            self.next_transfer_from = max(0, end - end % store.store_config.mapped_file_size_commit_log_bytes)
        else:
            self.next_transfer_from = self.slave_request_offset
        log.info("HA transfer to %s starts at %d", self.remote, self.next_transfer_from)
        try:
            while True:
                self.wake.clear()
                data = store.get_commit_log_data(self.next_transfer_from, cfg.ha_transfer_batch_size)
                now = _now_ms()
                if data:
                    self.writer.write(encode_transfer(self.next_transfer_from, data))
                    self.next_transfer_from += len(data)
                    self.last_write_ms = self.last_transfer_ms = now
                    await self.writer.drain()
                    continue
                if now - self.last_write_ms > heartbeat_ms:
                    self.writer.write(encode_transfer(self.next_transfer_from))
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
        """``lagBytes``: the master's CommitLog end minus the slave's acknowledged offset; ``lagSeconds``: how long
        the slave has been behind (0 when caught up), measured from its last ack that reached the end."""
        lag = max(0, master_offset - max(self.slave_ack_offset, 0))
        behind_s = 0.0 if lag == 0 else max(0.0, (_now_ms() - self.caught_up_ms) / 1000)
        return {"remote": self.remote, "ackOffset": self.slave_ack_offset, "lagBytes": lag,
                "lagSeconds": round(behind_s, 3), "lastReadMs": self.last_read_ms,
                "lastTransferMs": self.last_transfer_ms}


class HAService:
    """The master's HA listener, its connections, and the SYNC_MASTER waiters."""

    def __init__(self, store: MessageStore, config: HaConfig) -> None:
        self.store = store
        self.config = config
        self.connections: set[HAConnection] = set()
        self.push2slave_max_offset = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []  # heap by offset
        self._seq = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._accept, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("HA service listening on %s:%d", host, self.port)
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        self.connections.add(conn)
        self.store.reput.undefer()  # appends from now on are dispatched at once (the slave waits for them)
        log.info("HA connection from slave %s", conn.remote)
        await conn.serve()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    # ------------------------------------------------------------------ new data
    def notify(self) -> None:
        """New CommitLog bytes: wake the connections' writers (safe from any thread)."""
        loop = self._loop
        if loop is None or not self.connections:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake_all()
        else:
            loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for conn in self.connections:
            conn.wake.set()

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
        master_offset = self.store.max_phy_offset()
        slaves = [c.info(master_offset) for c in sorted(self.connections, key=lambda c: c.remote)]
        return {"haListenPort": self.port, "haConnections": len(slaves), "haPush2SlaveMaxOffset":
                self.push2slave_max_offset, "haSlaves": json.dumps(slaves, separators=(",", ":"))}
