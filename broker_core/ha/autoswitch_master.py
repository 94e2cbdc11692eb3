"""The master side of autoswitch HA (RocketMQ 5 ``AutoSwitchHAService``, reference ``rocketmq-controller.md`` §3.4,
§4.4, §5): the listener, one connection per slave (``autoswitch_connection.py``), the SyncStateSet bookkeeping and
the acknowledgement rules of controller mode.

Per connection: the slave's HANDSHAKE (its controller id) is answered with this broker's epoch entries and
CommitLog end; its first ack is the start point (0: the CommitLog's min offset, or the start of the last file
with syncFromLastFile); each ack is its acknowledged offset. Batches are at most ``haTransferBatchSize`` and
never cross an epoch boundary; each carries the epoch, its start offset and the confirm offset. With nothing
to send for ``haSendHeartbeatInterval`` a header-only heartbeat goes.

SyncStateSet (SSS, controller ids; the master is a member):
- caught-up time: an ack at or past the master's end as of the last batch sent (or an idle heartbeat) sets it;
- expand: a slave outside the set whose ack reaches the confirm offset and the last epoch's start offset is
  proposed at once (``on_expand``, the ReplicasManager's 1001);
- shrink (``members_to_keep``): members not caught up for ``haMaxTimeSlaveNotCatchup`` and members other than
  the master without a connection are dropped;
- a pending change (proposed, not yet confirmed): acks use the union of the local and proposed sets, and the
  in-sync count is the larger size, so a shrink never loosens acks before the controller commits it.

Acks (:meth:`AutoSwitchHAService.wait_acked`): allAckInSyncStateSet -> every SSS member (by its handshake id)
must ack the put's end; else ``inSyncReplicas - 1`` acks from any connections. ``slaveTimeout`` ->
FLUSH_SLAVE_TIMEOUT (the message stays stored).

Invariants:
1. A put is acknowledged only when the rule above holds for the sets as they are when the ack is checked;
   a member removed from the set stops counting only after the controller confirmed its removal.
2. Bytes go to a slave in CommitLog order, each batch inside one epoch's range.
3. Everything runs on the broker's event loop; :meth:`AutoSwitchHAService.notify` is the only cross-thread call.

Crash behaviour: nothing is persisted here (the epoch file is the store's). Slaves reconnect and handshake.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.ha.autoswitch_connection import AutoSwitchHAConnection
from broker_core.ha.transfer import HAListener
from broker_core.ha.transfer import now_ms as wall_ms
from broker_core.remoting.loops import within
from broker_core.store import PutStatus

if TYPE_CHECKING:
    from broker_core.config import BrokerConfig
    from broker_core.store import MessageStore
    from broker_core.store.epoch_file import EpochFile

log = logging.getLogger(__name__)

class AutoSwitchHAService(HAListener[AutoSwitchHAConnection]):
    """The master's autoswitch HA listener, its SSS and its ack waiters (module docstring)."""

    kind = "autoswitch HA"

    def __init__(self, store: MessageStore, config: BrokerConfig, epochs: EpochFile) -> None:
        super().__init__(store)
        self.config = config
        self.epochs = epochs
        self.is_master = False
        self.local_broker_id = -1
        self.sync_state_set: set[int] = set()
        self.sync_state_set_epoch = 0
        self.pending_set: set[int] | None = None  # proposed to the controller, not confirmed yet
        self.confirm_offset = -1
        self.on_expand: Callable[[set[int]], None] | None = None  # propose a new set (ReplicasManager)
        self.on_connection_lost: Callable[[], None] | None = None  # check the set for a shrink now (§3.4)
        self._waiters: dict[int, tuple[int, asyncio.Future[bool]]] = {}
        self._seq = itertools.count()

    def connection(self, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> AutoSwitchHAConnection | None:
        return AutoSwitchHAConnection(self, reader, writer) if self.is_master else None  # only a master serves

    async def close(self) -> None:
        await super().close()
        self.fail_waiters()

    def fail_waiters(self) -> None:
        for _, fut in self._waiters.values():
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    def connection_closed(self, conn: AutoSwitchHAConnection) -> None:
        self.connections.discard(conn)
        if self.is_master and conn.slave_id in self.sync_state_set and self.on_connection_lost is not None:
            self.on_connection_lost()
        log.info("HA connection from slave %d (%s) closed (acked %d)", conn.slave_id, conn.remote, conn.ack_offset)

    # ------------------------------------------------------------------ SyncStateSet
    def set_sync_state_set(self, members: set[int], epoch: int) -> None:
        """Adopt a confirmed set (a role change or a 1001 answer); only a newer epoch replaces the local one."""
        if epoch < self.sync_state_set_epoch:
            return
        self.sync_state_set = set(members)
        self.sync_state_set_epoch = epoch
        if self.pending_set is not None and self.pending_set == self.sync_state_set:
            self.pending_set = None
        self._update_confirm()
        self._check_waiters()

    def propose(self, members: set[int]) -> None:
        self.pending_set = set(members)

    def clear_pending(self) -> None:
        self.pending_set = None
        self._check_waiters()

    def ack_set(self) -> set[int]:
        """The members whose acks count: the local set, with a pending proposal's members added (union rule)."""
        return self.sync_state_set | (self.pending_set or set())

    def in_sync_replicas(self) -> int:
        return max(len(self.sync_state_set), len(self.pending_set or ()))

    def _conn_of(self, broker_id: int) -> AutoSwitchHAConnection | None:
        best = None
        for c in self.connections:
            if c.slave_id == broker_id and (best is None or c.ack_offset > best.ack_offset):
                best = c
        return best

    def members_to_keep(self, now_ms: int | None = None) -> set[int]:
        """The shrink check: members caught up within haMaxTimeSlaveNotCatchup and connected (and the master)."""
        now = wall_ms() if now_ms is None else now_ms
        limit = self.config.controller.ha_max_time_slave_not_catchup_ms
        keep = set()
        for member in self.sync_state_set:
            if member == self.local_broker_id:
                keep.add(member)
                continue
            conn = self._conn_of(member)
            if conn is not None and now - conn.caught_up_ms <= limit:
                keep.add(member)
        return keep

    def acked(self, conn: AutoSwitchHAConnection) -> None:
        """An ack arrived: maybe expand the set, move the confirm offset, release waiters."""
        if (self.is_master and not conn.async_learner and conn.slave_id >= 0
                and conn.slave_id not in self.ack_set() and conn.ack_offset >= self.confirm()
                and conn.ack_offset >= self._last_epoch_start() and self.on_expand is not None):
            self.on_expand(self.sync_state_set | {conn.slave_id})
        self._update_confirm()
        self._check_waiters()

    def _last_epoch_start(self) -> int:
        last = self.epochs.last()
        return last.start_offset if last else 0

    def confirm(self) -> int:
        """§5: the master's confirm offset: its CommitLog end when the set is the master alone or allAck is off;
        else the smallest ack of the set's members (:meth:`_update_confirm`)."""
        if self.is_master and (len(self.sync_state_set) <= 1 or not self.config.controller.all_ack_in_sync_state_set):
            return self.store.max_phy_offset()
        return self.confirm_offset

    def _update_confirm(self) -> None:
        """The smallest ack of the connected SyncStateSet members, the old value kept while a member has no
        connection; never lower. A rise lets the store dispatch further (it consumes only below it)."""
        if not self.is_master:
            return
        end = self.store.max_phy_offset()
        if len(self.sync_state_set) <= 1 or not self.config.controller.all_ack_in_sync_state_set:
            self.confirm_offset = end
            return
        acks = []
        for member in self.sync_state_set:
            if member == self.local_broker_id:
                continue
            conn = self._conn_of(member)
            if conn is None:
                return
            acks.append(conn.ack_offset)
        if acks and min(min(acks), end) > self.confirm_offset:
            self.confirm_offset = min(min(acks), end)
            self.store.dispatch_more()

    # ------------------------------------------------------------------ acknowledgements
    def acked_offset(self) -> int:
        """The CommitLog offset every put below which is acknowledged under the current rules."""
        ctl = self.config.controller
        end = self.store.max_phy_offset()
        if ctl.all_ack_in_sync_state_set:
            acks = []
            for member in self.ack_set():
                if member == self.local_broker_id:
                    continue
                conn = self._conn_of(member)
                acks.append(conn.ack_offset if conn is not None else -1)
            return min(acks) if acks else end
        need = ctl.in_sync_replicas - 1
        if need <= 0:
            return end
        offs = sorted((c.ack_offset for c in self.connections), reverse=True)
        return offs[need - 1] if len(offs) >= need else -1

    def _check_waiters(self) -> None:
        if not self._waiters:
            return
        done_upto = self.acked_offset()
        for key, (end, fut) in list(self._waiters.items()):
            if end <= done_upto:
                del self._waiters[key]
                if not fut.done():
                    fut.set_result(True)

    async def wait_acked(self, end: int) -> PutStatus:
        """PUT_OK once the put ending at ``end`` is acknowledged (§5), else FLUSH_SLAVE_TIMEOUT after slaveTimeout;
        SERVICE_NOT_AVAILABLE when this broker stopped being the master meanwhile."""
        if self.acked_offset() >= end:
            return PutStatus.PUT_OK
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        key = next(self._seq)
        self._waiters[key] = (end, fut)
        self._wake_all()
        try:
            ok = await within(fut, self.config.ha.slave_timeout_ms / 1000)
        except TimeoutError:
            ok = False
        finally:
            self._waiters.pop(key, None)
        if ok:
            return PutStatus.PUT_OK
        return PutStatus.FLUSH_SLAVE_TIMEOUT if self.is_master else PutStatus.SERVICE_NOT_AVAILABLE

    def info(self) -> dict[str, object]:
        end = self.store.max_phy_offset()
        return {"haListenPort": self.port, "haConnections": len(self.connections),
                "haSlaves": self.slaves_info(end),
                "syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch,
                "confirmOffset": self.confirm()}
