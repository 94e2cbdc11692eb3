"""What the master side of both HA flavours shares: the listener and the per-slave connection skeleton.

Classic HA (``master.py``, RocketMQ 4.9 ``HAService``/``HAConnection``) and controller mode's autoswitch HA
(``autoswitch_master.py`` / ``autoswitch_connection.py``, RocketMQ 5) serve a slave the same way; only the bytes
differ, and those stay in each flavour's ``wire`` module, written by the subclass hooks below:

- :class:`SlaveConnection`: a read side that drops the connection after ``haHousekeepingInterval`` without
  hearing from the slave and hands every chunk it reads to :meth:`SlaveConnection.on_data`; a write side that
  waits until the read side set ``next_transfer_from`` (the slave's start point), then streams batches read by
  :meth:`SlaveConnection.read_batch` and framed by :meth:`SlaveConnection.frame`, each starting where the last
  one ended, and a header-only heartbeat after ``haSendHeartbeatInterval`` with nothing to send.
- :class:`HAListener`: the listening socket, one connection per accepted slave, and :meth:`HAListener.notify`,
  which wakes every connection's write side when the CommitLog grew (the only call safe from any thread).

Invariant: bytes go to a slave in CommitLog order without gaps (``next_transfer_from`` only moves by the size
of what was written). Crash behaviour: nothing is persisted here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Generic, TypeVar

from broker_core.remoting.loops import within

if TYPE_CHECKING:
    from broker_core.config import HaConfig
    from broker_core.store import MessageStore

log = logging.getLogger(__name__)

IDLE_WAIT_S = 0.1  # upstream waits 100 ms for new data when a slave is up to date
_READ_BYTES = 64 * 1024


def now_ms() -> int:
    return int(time.time() * 1000)


def last_file_start(store: MessageStore) -> int:
    """The start of the CommitLog's last segment: where a slave with an empty store begins when it asks to."""
    end = store.max_phy_offset()
    return max(0, end - end % store.store_config.mapped_file_size_commit_log_bytes)


def peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)


class SlaveConnection:
    """One slave's connection on the master (module docstring); subclasses speak a flavour's wire."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ha: HaConfig) -> None:
        self.reader = reader
        self.writer = writer
        self.ha = ha
        self.remote = peer_name(writer)
        self.next_transfer_from = -1  # set by the read side from the slave's first report
        self.last_read_ms = now_ms()
        self.last_write_ms = 0
        self.wake = asyncio.Event()
        self.closed = False

    # ------------------------------------------------------------------ the flavour's hooks
    def on_data(self, data: bytes) -> bool:
        """Bytes from the slave; False closes the connection."""
        raise NotImplementedError

    def read_batch(self, offset: int) -> bytes | None:
        """The CommitLog bytes of the next batch from ``offset`` (None or empty: nothing to send now)."""
        raise NotImplementedError

    def frame(self, offset: int, body: bytes, now: int) -> bytes:
        """The frame to send for ``body`` from ``offset`` (an empty body: a heartbeat), just before it is sent."""
        raise NotImplementedError

    def closing(self) -> None:
        """The connection closed (once): tell the service."""
        raise NotImplementedError

    def info(self, master_offset: int) -> dict[str, object]:
        """This slave's state for the runtime info, given the master's CommitLog end."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the shared skeleton
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
            self.closing()

    def start_transfer(self, offset: int) -> None:
        """The read side learned where the slave starts: release the write side."""
        self.next_transfer_from = offset
        self.wake.set()

    async def _read_loop(self) -> None:
        housekeeping_ms = self.ha.ha_housekeeping_interval_ms
        while True:
            try:
                data = await within(self.reader.read(_READ_BYTES), housekeeping_ms / 1000)
            except TimeoutError:
                log.warning("HA slave %s silent for %d ms; closing", self.remote, housekeeping_ms)
                return
            except (ConnectionError, OSError) as exc:
                log.info("HA slave %s: %s", self.remote, exc)
                return
            if not data:
                return
            self.last_read_ms = now_ms()
            if not self.on_data(data):
                return

    async def _write_loop(self) -> None:
        heartbeat_ms = self.ha.ha_send_heartbeat_interval_ms
        while self.next_transfer_from < 0:
            self.wake.clear()
            await self.wake.wait()
        try:
            while True:
                self.wake.clear()
                offset = self.next_transfer_from
                data = self.read_batch(offset)
                now = now_ms()
                if data:
                    self.writer.write(self.frame(offset, data, now))
                    self.next_transfer_from += len(data)
                    self.last_write_ms = now
                    await self.writer.drain()
                    continue
                if now - self.last_write_ms > heartbeat_ms:
                    self.writer.write(self.frame(offset, b"", now))
                    self.last_write_ms = now
                    await self.writer.drain()
                try:
                    await within(self.wake.wait(), IDLE_WAIT_S)
                except TimeoutError:
                    pass
        except (ConnectionError, OSError) as exc:
            log.info("HA transfer to %s stopped: %s", self.remote, exc)
            self.writer.close()


C = TypeVar("C", bound=SlaveConnection)


class HAListener(Generic[C]):
    """The master's HA port and its connections (module docstring); subclasses make the connections."""

    kind = "HA"  # for the log

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.connections: set[C] = set()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> C | None:
        """A connection for an accepted slave, or None to refuse it (the writer is closed then)."""
        raise NotImplementedError

    async def start(self, host: str, port: int) -> int:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._accept, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("%s service listening on %s:%d", self.kind, host, self.port)
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self.connection(reader, writer)
        if conn is None:
            writer.close()
            return
        self.connections.add(conn)
        self.store.reput.undefer()  # appends from now on are dispatched at once (the slave waits for them)
        log.info("HA connection from slave %s", conn.remote)
        await conn.serve()

    def close_connections(self) -> None:
        for conn in list(self.connections):
            conn.close()

    async def close(self) -> None:
        """Stop listening and close every connection (subclasses also release what waits on them)."""
        if self._server is not None:
            self._server.close()
        self.close_connections()

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

    def slaves_info(self, master_offset: int) -> list[dict[str, object]]:
        return [c.info(master_offset) for c in sorted(self.connections, key=lambda c: c.remote)]
