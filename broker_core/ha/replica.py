"""What the slave side of both HA flavours shares: the link to the master and the append of what it streams.

Classic HA (``slave.py``, RocketMQ 4.9 ``HAClient``) and controller mode's autoswitch HA (``autoswitch_slave.py``,
RocketMQ 5 ``AutoSwitchHAClient``) keep one connection to the master's HA port the same way; what they send
and how they read the master's frames stay in the subclass hooks (each flavour's ``wire`` module):

- :class:`MasterLink` reconnects for as long as it runs: after a session ends it waits ``retry_s`` (or
  ``idle_retry_s`` with no master address), or less when :meth:`MasterLink.address_changed` is called.
- A session ends when the master's HA address changes, when the master closes, and after
  ``haHousekeepingInterval`` without a byte from the master; it reports (:meth:`MasterLink.report`) whenever
  :meth:`MasterLink.report_due` says so, and hands every chunk it reads to :meth:`MasterLink.received`.
- :meth:`MasterLink.append` gives the store whole records only (``split_whole_records``): the tail of a record
  cut by the master's batching is held until the rest arrives, so where the next batch must start is the
  store's end plus the held bytes (:meth:`MasterLink.check_continues`). The held tail is dropped with the
  session; the next one starts at the store's end, which is what the slave reports.

Crash behaviour: nothing of its own is persisted; after a crash the store recovers to its last whole record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.ha.transfer import now_ms
from broker_core.remoting.loops import within
from broker_core.store import ReplicaError, split_whole_records

if TYPE_CHECKING:
    from broker_core.config import HaConfig
    from broker_core.store import MessageStore

log = logging.getLogger(__name__)

_READ_BYTES = 256 * 1024


class MasterLink:
    """A slave's connection to its master (module docstring); subclasses speak a flavour's wire."""

    kind = "HA"  # for the log
    retry_s = 5.0  # the wait after a session ends (upstream's, after a failed connection)
    idle_retry_s = 1.0  # the wait while no master address is known
    max_read_wait_s = float("inf")  # a read waits haSendHeartbeatInterval, at most this

    def __init__(self, store: MessageStore, ha: HaConfig, master_ha_addr: Callable[[], str]) -> None:
        self.store = store
        self.ha = ha
        self.master_ha_addr = master_ha_addr
        self.connected_to = ""
        self.master_offset = -1  # the master's position as of its last frame
        self.last_read_ms = 0
        self.last_append_ms = 0
        self.appended_bytes = 0
        self.last_report = 0.0  # time.monotonic() of the last report
        self._partial = b""  # the held tail of a record cut by the master's batching
        self._task: asyncio.Task[None] | None = None
        self._addr_changed = asyncio.Event()

    # ------------------------------------------------------------------ the flavour's hooks
    async def opened(self, addr: str, writer: asyncio.StreamWriter) -> None:
        """The connection to ``addr`` is up: send what the flavour sends first."""
        raise NotImplementedError

    async def received(self, addr: str, data: bytes, writer: asyncio.StreamWriter) -> None:
        """Bytes from the master; raise to end the session."""
        raise NotImplementedError

    def report_due(self, got_data: bool, heartbeat_s: float) -> bool:
        """Whether to report to the master now (after a read, ``got_data`` when it brought bytes)."""
        raise NotImplementedError

    def report(self, writer: asyncio.StreamWriter) -> None:
        """Write the slave's report (its CommitLog end) and set ``last_report``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the shared skeleton
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
                    log.warning("%s connection to master %s: %s", self.kind, addr, exc)
                finally:
                    self.connected_to = ""
            self._addr_changed.clear()
            try:
                await within(self._addr_changed.wait(), self.retry_s if addr else self.idle_retry_s)
            except TimeoutError:
                pass

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await within(asyncio.open_connection(host, int(port)), 3.0)
        heartbeat_s = self.ha.ha_send_heartbeat_interval_ms / 1000
        housekeeping_ms = self.ha.ha_housekeeping_interval_ms
        read_wait_s = min(heartbeat_s, self.max_read_wait_s)
        self._partial = b""
        try:
            await self.opened(addr, writer)
            self.last_read_ms = now_ms()
            while True:
                if self.master_ha_addr() != addr:
                    log.info("HA master moved from %s to %s", addr, self.master_ha_addr())
                    return
                try:
                    data = await within(reader.read(_READ_BYTES), read_wait_s)
                except TimeoutError:
                    data = None
                if data == b"":
                    raise ConnectionError("the master closed the HA connection")
                if data:
                    self.last_read_ms = now_ms()
                    await self.received(addr, data, writer)
                elif now_ms() - self.last_read_ms > housekeeping_ms:
                    raise TimeoutError(f"nothing from the master for {housekeeping_ms} ms")
                if self.report_due(bool(data), heartbeat_s):
                    self.report(writer)
                    await writer.drain()
        finally:
            writer.close()

    def check_continues(self, offset: int) -> None:
        """A batch must start at the store's end plus the held tail (anywhere while the CommitLog is empty)."""
        end = self.store.max_phy_offset()
        expected = end + len(self._partial)
        if (end != 0 or self._partial) and offset != expected:
            raise ReplicaError(f"master sent offset {offset}, this slave expects {expected}")

    def append(self, offset: int, body: bytes) -> None:
        """Append the whole records of the held tail plus ``body`` (which starts at ``offset``); hold the rest."""
        partial = self._partial
        data = partial + body if partial else body
        start = offset - len(partial)
        segment = self.store.store_config.mapped_file_size_commit_log_bytes
        view = memoryview(data)
        done = 0
        while whole := split_whole_records(view[done:], start + done, segment):
            self.store.append_replicated(start + done, view[done:done + whole])
            done += whole
            self.appended_bytes += whole
            self.last_append_ms = now_ms()
        self._partial = bytes(view[done:])

    def info(self) -> dict[str, object]:
        """``haMasterAddr``, the slave's CommitLog end, the master's offset as last heard, the bytes between."""
        end = self.store.max_phy_offset()
        return {"haMasterAddr": self.master_ha_addr(), "haConnected": bool(self.connected_to),
                "haSlaveOffset": end, "haMasterOffset": self.master_offset,
                "haSlaveLagBytes": max(0, self.master_offset - end) if self.master_offset >= 0 else -1}
