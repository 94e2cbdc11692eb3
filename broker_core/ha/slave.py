"""The slave side of HA (upstream ``HAClient``): connect to the master's HA port, report the CommitLog end,
append what the master streams.

Protocol (reference §8): the slave reports its max CommitLog offset (8 bytes) when it connects, after each
append that moved it, and every ``haSendHeartbeatInterval`` as a heartbeat. (Upstream's first report waits
for that interval, about 5 s after connecting; this one goes at once, which any master accepts.) Each
chunk from the master carries its CommitLog offset; a chunk that does not continue this slave's CommitLog
closes the connection, unless the slave's CommitLog is empty (then the first chunk may start anywhere the
master chooses: the start of its last segment).

Invariants:
1. The store receives whole records only (``split_whole_records``): the tail of a record cut by the 32 KiB
   chunking waits in ``partial`` until the rest arrives, so ``expected`` (where the next chunk must start) is
   the store's end plus ``len(partial)``. ``partial`` is dropped with the connection; the next one starts at
   the store's end, which is what the slave reports.
2. The reported offset is the store's end: an acknowledged offset is always on a record boundary and in the
   store.
3. The connection is dropped after ``haHousekeepingInterval`` without data or heartbeat from the master; the
   client then reconnects (after 5 s, as upstream, or at once when the master's address changed).

Crash behaviour: nothing of its own is persisted. After a crash the store recovers to its last valid record
and the next connection reports that offset.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.ha.wire import TransferReader, encode_report
from broker_core.remoting.loops import within
from broker_core.store import ReplicaError, split_whole_records

if TYPE_CHECKING:
    from broker_core.config import HaConfig
    from broker_core.store import MessageStore

log = logging.getLogger(__name__)

RECONNECT_S = 5.0  # upstream's wait after a failed connection
_READ_BYTES = 256 * 1024


class HAClient:
    def __init__(self, store: MessageStore, config: HaConfig, master_ha_addr: Callable[[], str]) -> None:
        self.store = store
        self.config = config
        self.master_ha_addr = master_ha_addr
        self.connected_to = ""
        self.reported_offset = -1
        self.master_offset = -1  # the master's position as of its last chunk or heartbeat header
        self.last_read_ms = 0
        self.last_append_ms = 0
        self.appended_bytes = 0
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
                except (ConnectionError, OSError, TimeoutError, ValueError, ReplicaError) as exc:
                    log.warning("HA connection to master %s: %s", addr, exc)
                finally:
                    self.connected_to = ""
            self._addr_changed.clear()
            try:
                await within(self._addr_changed.wait(), RECONNECT_S if addr else 1.0)
            except TimeoutError:
                pass

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await within(asyncio.open_connection(host, int(port)), 3.0)
        self.connected_to = addr
        log.info("HA connected to master %s; CommitLog ends at %d", addr, self.store.max_phy_offset())
        cfg = self.config
        heartbeat_s = cfg.ha_send_heartbeat_interval_ms / 1000
        housekeeping_ms = cfg.ha_housekeeping_interval_ms
        segment = self.store.store_config.mapped_file_size_commit_log_bytes
        parser = TransferReader()
        partial = b""
        self.last_read_ms = _now_ms()
        try:
            self._report(writer)
            last_report = time.monotonic()
            while True:
                if self.master_ha_addr() != addr:
                    log.info("HA master moved from %s to %s", addr, self.master_ha_addr())
                    return
                try:
                    data = await within(reader.read(_READ_BYTES), heartbeat_s)
                except TimeoutError:
                    data = None
                if data == b"":
                    raise ConnectionError("the master closed the HA connection")
                if data:
                    self.last_read_ms = _now_ms()
                    for offset, body in parser.feed(data):
                        partial = self._apply(offset, body, partial, segment)
                elif _now_ms() - self.last_read_ms > housekeeping_ms:
                    raise TimeoutError(f"nothing from the master for {housekeeping_ms} ms")
                end = self.store.max_phy_offset()
                if end != self.reported_offset or time.monotonic() - last_report >= heartbeat_s:
                    self._report(writer)
                    last_report = time.monotonic()
                    await writer.drain()
        finally:
            writer.close()

    def _apply(self, offset: int, body: bytes, partial: bytes, segment: int) -> bytes:
        """One chunk: check it continues this CommitLog, append its whole records, keep the cut tail."""
        end = self.store.max_phy_offset()
        expected = end + len(partial)
        self.master_offset = offset + len(body)
        if (end != 0 or partial) and offset != expected:
            raise ReplicaError(f"master sent offset {offset}, this slave expects {expected}")
        if not body:
            return partial
        data = partial + body if partial else body
        start = offset - len(partial)
        view = memoryview(data)
        done = 0
        while whole := split_whole_records(view[done:], start + done, segment):
            self.store.append_replicated(start + done, view[done:done + whole])
            done += whole
            self.appended_bytes += whole
            self.last_append_ms = _now_ms()
        return bytes(view[done:])

    def _report(self, writer: asyncio.StreamWriter) -> None:
        self.reported_offset = self.store.max_phy_offset()
        writer.write(encode_report(self.reported_offset))

    def info(self) -> dict[str, object]:
        """``haMasterAddr``, the slave's reported offset, the master's offset as last heard, the bytes between."""
        end = self.store.max_phy_offset()
        return {"haMasterAddr": self.master_ha_addr(), "haConnected": bool(self.connected_to),
                "haSlaveOffset": end, "haMasterOffset": self.master_offset,
                "haSlaveLagBytes": max(0, self.master_offset - end) if self.master_offset >= 0 else -1,
                "haLastReadMs": self.last_read_ms, "haLastAppendMs": self.last_append_ms}


def _now_ms() -> int:
    return int(time.time() * 1000)
