"""Invisible-time renewal for push consumers, as Apache's proxy does it (``DefaultReceiptHandleManager``).

A ReceiveMessage with ``auto_renew`` (the push consumers of the official clients) hands its messages out for
``defaultInvisibleTimeMills`` (60 s) whatever invisible duration it asked, and the broker keeps them invisible
while the listener works: every ``renewSchedulePeriodMillis`` (5 s) it renews each handle within
``renewAheadTimeMillis`` (10 s) of its deadline by the next step of ``RenewStrategyPolicy`` (1 m, 3 m, 5 m,
10 m, 30 m, then 1 h), until ``renewMaxTimeMillis`` (3 h) after the receive, then lets it come back. The client
keeps the handle it was given; an ack, a change of invisible duration or a forward to the DLQ names it, and
:meth:`Renewals.take` swaps in the current (renewed) handle and stops the renewal. A client that ended
(NotifyClientTermination) has its handles dropped, not renewed: they come back at their deadline.

Invariants: a handle is renewed only while its renewal is registered; a renewal that fails (the delivery was
acked, or came back, through another way) is dropped. State is memory only: after a restart the deliveries
come back at their deadlines (at least once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker_core.protocol.fields import BadRequest

if TYPE_CHECKING:
    from broker_core.config import GrpcConfig
    from broker_core.server.ports import PopPort

log = logging.getLogger(__name__)

RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)  # RenewStrategyPolicy


@dataclass
class Renewal:
    client_id: str
    handle: str  # the current handle (renewed ones replace the one the client holds)
    deadline_ms: int
    received_ms: int
    times: int = 0


class Renewals:
    def __init__(self, pop: PopPort, config: GrpcConfig) -> None:
        self.pop = pop
        self.config = config
        self.entries: dict[tuple[str, str], Renewal] = {}  # (group, handle the client holds) -> renewal
        self._task: asyncio.Task[None] | None = None

    def add(self, client_id: str, group: str, handle: str, deadline_ms: int) -> None:
        now = int(time.time() * 1000)
        self.entries[(group, handle)] = Renewal(client_id, handle, deadline_ms, now)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def take(self, group: str, handle: str) -> str:
        """The current handle of the delivery the client's ``handle`` names (itself when not renewed); its
        renewal ends (the client acks it, changes its invisible time or forwards it)."""
        entry = self.entries.pop((group, handle), None)
        return entry.handle if entry is not None else handle

    def client_gone(self, client_id: str) -> None:
        for key in [k for k, e in self.entries.items() if e.client_id == client_id]:
            del self.entries[key]

    def renew_due(self) -> int:
        """One scan: renew what is within ``renewAheadTimeMillis`` of its deadline. Returns how many."""
        cfg = self.config
        now = int(time.time() * 1000)
        renewed = 0
        for key, e in list(self.entries.items()):
            if e.deadline_ms - now > cfg.renew_ahead_time_ms:
                continue
            if now - e.received_ms >= cfg.renew_max_time_ms:
                del self.entries[key]  # as long as the proxy keeps one: it comes back at its deadline
                continue
            step = RENEW_STEPS_MS[min(e.times, len(RENEW_STEPS_MS) - 1)]
            try:
                e.handle = self.pop.change_invisible(key[0], e.handle, step)
            except (ValueError, BadRequest) as exc:  # HandleError: acked, expired or delivered again meanwhile
                log.debug("renewal of %s stops: %s", key[1], exc)
                del self.entries[key]
                continue
            e.deadline_ms = now + step
            e.times += 1
            renewed += 1
        return renewed

    async def _run(self) -> None:
        while self.entries:
            await asyncio.sleep(self.config.renew_schedule_period_ms / 1000)
            if self.renew_due() and self.pop.state.sync_each:
                await asyncio.get_running_loop().run_in_executor(None, self.pop.state.sync)
