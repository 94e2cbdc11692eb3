"""The slave side of HA (upstream ``HAClient``): connect to the master's HA port, report the CommitLog end,
append what the master streams.

Protocol (reference §8): the slave reports its max CommitLog offset (8 bytes) when it connects, after each
append that moved it, and every ``haSendHeartbeatInterval`` as a heartbeat. (Upstream's first report waits
for that interval, about 5 s after connecting; this one goes at once, which any master accepts.) Each
chunk from the master carries its CommitLog offset; a chunk that does not continue this slave's CommitLog
closes the connection, unless the slave's CommitLog is empty (then the first chunk may start anywhere the
master chooses: the start of its last segment).

Invariants:
1. The store receives whole records only (``replica.MasterLink.append``): the tail of a record cut by the
   32 KiB chunking is held until the rest arrives, so where the next chunk must start is the store's end plus
   the held bytes. The held tail is dropped with the connection; the next one starts at the store's end, which
   is what the slave reports.
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

from broker_core.ha.replica import MasterLink
from broker_core.ha.wire import TransferReader, encode_report

if TYPE_CHECKING:
    from broker_core.config import HaConfig
    from broker_core.store import MessageStore

log = logging.getLogger(__name__)


class HAClient(MasterLink):
    def __init__(self, store: MessageStore, config: HaConfig, master_ha_addr: Callable[[], str]) -> None:
        super().__init__(store, config, master_ha_addr)
        self.config = config
        self.reported_offset = -1
        self._parser = TransferReader()

    async def opened(self, addr: str, writer: asyncio.StreamWriter) -> None:
        self.connected_to = addr
        log.info("HA connected to master %s; CommitLog ends at %d", addr, self.store.max_phy_offset())
        self._parser = TransferReader()
        self.report(writer)

    async def received(self, addr: str, data: bytes, writer: asyncio.StreamWriter) -> None:
        for offset, body in self._parser.feed(data):
            self._apply(offset, body)

    def report_due(self, got_data: bool, heartbeat_s: float) -> bool:
        return (self.store.max_phy_offset() != self.reported_offset
                or time.monotonic() - self.last_report >= heartbeat_s)

    def report(self, writer: asyncio.StreamWriter) -> None:
        self.reported_offset = self.store.max_phy_offset()
        writer.write(encode_report(self.reported_offset))
        self.last_report = time.monotonic()

    def _apply(self, offset: int, body: bytes) -> None:
        """One chunk: check it continues this CommitLog (a heartbeat too), append its whole records."""
        self.master_offset = offset + len(body)
        self.check_continues(offset)
        if body:
            self.append(offset, body)

    def info(self) -> dict[str, object]:
        """``haMasterAddr``, the slave's reported offset, the master's offset as last heard, the bytes between."""
        return {**super().info(), "haLastReadMs": self.last_read_ms, "haLastAppendMs": self.last_append_ms}
