"""BrokerHeartbeatManager: which brokers are alive, as one controller sees it (reference §3.2).

Each controller keeps its own table, in memory, never replicated: (clusterName, brokerName, brokerId) ->
:class:`BrokerLiveInfo`. A broker is alive while ``last_update + timeout >= now``. :meth:`scan` drops expired
entries and reports them; :meth:`on_channel_close` reports at once every broker whose heartbeats came over the
closed connection. A heartbeat refreshes the time, the timeout and the priority; epoch, maxOffset and
confirmOffset change only when the epoch rises, or stays equal while maxOffset rises.

The clock is injected (milliseconds); the caller decides what "inactive" does (the leader re-elects).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker_core.controller.elect import LiveInfo

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 10_000  # heartbeatTimeoutMills when the broker sends none
INT_MAX = (1 << 31) - 1

BrokerKey = tuple[str, str, int]  # (clusterName, brokerName, brokerId)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class BrokerLiveInfo:
    broker_name: str
    broker_addr: str
    broker_id: int
    last_update_ms: int
    timeout_ms: int
    channel: Any
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = INT_MAX


class BrokerHeartbeatManager:
    def __init__(self, clock: Callable[[], int] = _now_ms) -> None:
        self.clock = clock
        self.table: dict[BrokerKey, BrokerLiveInfo] = {}

    def on_heartbeat(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int,
                     timeout_ms: int | None, channel: Any, epoch: int | None, max_offset: int | None,
                     confirm_offset: int | None, election_priority: int | None) -> None:
        key = (cluster, broker_name, broker_id)
        now = self.clock()
        real_epoch = -1 if epoch is None else epoch
        real_max = -1 if max_offset is None else max_offset
        real_confirm = -1 if confirm_offset is None else confirm_offset
        real_timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout_ms is None else timeout_ms
        real_priority = INT_MAX if election_priority is None else election_priority
        prev = self.table.get(key)
        if prev is None:
            self.table[key] = BrokerLiveInfo(broker_name, broker_addr, broker_id, now, real_timeout, channel,
                                             real_epoch, real_max, real_confirm, real_priority)
            return
        prev.last_update_ms = now
        prev.timeout_ms = real_timeout
        prev.election_priority = real_priority
        prev.broker_addr = broker_addr
        prev.channel = channel
        if real_epoch > prev.epoch or (real_epoch == prev.epoch and real_max > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = real_epoch, real_max, real_confirm

    def is_alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        info = self.table.get((cluster, broker_name, broker_id))
        return info is not None and info.last_update_ms + info.timeout_ms >= self.clock()

    def live_info(self, cluster: str, broker_name: str, broker_id: int) -> LiveInfo | None:
        info = self.table.get((cluster, broker_name, broker_id))
        if info is None:
            return None
        return LiveInfo(broker_id, info.epoch, info.max_offset, info.election_priority)

    def scan(self) -> list[tuple[BrokerKey, BrokerLiveInfo]]:
        """Remove and return the expired entries (the caller closes their channels and reports them)."""
        now = self.clock()
        expired = [(k, v) for k, v in self.table.items() if now - v.last_update_ms > v.timeout_ms]
        for k, _ in expired:
            del self.table[k]
        return expired

    def on_channel_close(self, channel: Any) -> list[BrokerKey]:
        """Remove and return the brokers whose last heartbeat came over ``channel``."""
        gone = [k for k, v in self.table.items() if v.channel is channel]
        for k in gone:
            del self.table[k]
        return gone

    def alive_brokers(self) -> list[BrokerLiveInfo]:
        now = self.clock()
        return [v for v in self.table.values() if v.last_update_ms + v.timeout_ms >= now]
