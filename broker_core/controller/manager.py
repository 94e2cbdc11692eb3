"""ControllerManager: one controller node (RocketMQ's ``ControllerManager`` + ``DLedgerController``).

It owns the replicated state (:class:`ReplicasInfoManager` behind :class:`RaftLog`), the in-memory heartbeat
table, the scans, and the role-change notifications. :mod:`broker_core.controller.processor` turns remoting
requests into calls here; the handlers live on whatever :class:`RemotingServer` hosts the controller (its own,
or the name server's).

Invariants:
1. Requests that read or change the replicated state run one at a time, on the event loop, on the serving
   leader only (others answer 2007 NOT_LEADER): check against the state, commit the resulting events, answer.
   The next one is checked only after the previous one's events are applied (RocketMQ's EventScheduler).
2. "Inactive" (a heartbeat expired, or the connection it came over closed) makes the serving leader re-elect
   the broker-set if that broker is its master; the leader's scan also re-elects every set whose master is
   dead while a replica lives. A controller-triggered election is tried up to electMasterMaxRetryCount times.
3. After every successful election (controller-, broker- or admin-triggered), if notifyBrokerRoleChanged, each
   alive member of the set gets a oneway 1008 over a connection to its address; a newer masterEpoch cancels a
   pending older notification to the same broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker_core.controller.config import ControllerConfig
from broker_core.controller.elect import DefaultElectPolicy
from broker_core.controller.events import ElectMasterEvent, Event
from broker_core.controller.heartbeat import BrokerHeartbeatManager
from broker_core.controller.raft import RaftLog
from broker_core.controller.replicas import ControllerResult, ReplicasInfoManager
from broker_core.protocol import RemotingCommand
from broker_core.protocol.codes import ResponseCode
from broker_core.protocol.controller import (
    ControllerRequestCode,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    decode_elect_master_body,
    encode_sync_state_set,
)
from broker_core.protocol.controller import ControllerResponseCode as C
from broker_core.remoting.client import RemotingClient

log = logging.getLogger(__name__)

WAIT_TIMEOUT_S = 5.0  # the controller waits this long for a commit (RocketMQ's WAIT_TIMEOUT_OUT)
ELECT_TRY_TIMEOUT_S = 3.0
NOTIFY_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Election:
    """An election that committed (for observers: logs, the console's history through 1006)."""

    broker_name: str
    new_master_broker_id: int | None
    master_epoch: int
    trigger: str  # "controller", "broker" or "admin"


class ControllerManager:
    def __init__(self, config: ControllerConfig) -> None:
        config.validate()
        self.config = config
        self.lock = threading.RLock()
        self.state = ReplicasInfoManager(config.enable_elect_unclean_master)
        self.heartbeats = BrokerHeartbeatManager()
        self.policy = DefaultElectPolicy(self.is_alive, self.heartbeats.live_info)
        self.client = RemotingClient(connect_timeout=NOTIFY_TIMEOUT_S)
        self.election_listeners: list[Callable[[Election], None]] = []
        self._queue = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._notify: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._scan_master_task: asyncio.Task[None] | None = None
        self._scan_broker_task: asyncio.Task[None] | None = None
        self.raft: RaftLog | None = None
        self._closing = False

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the Raft node and the heartbeat scan (call on the serving loop)."""
        self._queue = asyncio.Lock()
        self.raft = RaftLog(node_id=self.config.controller_dleger_self_id, raft_peers=self.config.raft_peers(),
                            store_path=self.config.store_path(), manager=self.state, lock=self.lock,
                            loop=asyncio.get_running_loop(),
                            election_timeout_ms=self.config.controller_raft_election_timeout_ms,
                            on_serving_change=self._serving_changed, on_events=self._events_applied)
        self._scan_broker_task = self._spawn(self._scan_not_active_brokers())

    async def close(self) -> None:
        """Stop serving first, so the connections the server closes next trigger no election."""
        self._closing = True
        for task in [self._scan_master_task, self._scan_broker_task, *self._tasks,
                     *(t for _, t in self._notify.values())]:
            if task is not None:
                task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.client.close()
        if self.raft is not None:
            raft, self.raft = self.raft, None
            await asyncio.to_thread(raft.close)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- queries -------------------------------------------------------------------------------------------

    def is_alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        return self.heartbeats.is_alive(cluster, broker_name, broker_id)

    def is_serving(self) -> bool:
        return not self._closing and self.raft is not None and self.raft.is_serving()

    def leader(self) -> tuple[str | None, str | None]:
        """(leader id, leader remoting address) as this node knows them."""
        if self.raft is None:
            return None, None
        leader_id = self.raft.leader_id()
        return leader_id, dict(self.config.peers()).get(leader_id or "")

    # -- the event scheduler -------------------------------------------------------------------------------

    async def run(self, check: Callable[[], ControllerResult], write: bool = True) -> ControllerResult:
        """Check ``check()`` against the state and commit its events (reads: ``write=False``, no commit unless
        processReadEvent). A node that is not the serving leader answers NOT_LEADER."""
        not_leader = ControllerResult().fail(C.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
        if not self.is_serving():
            return not_leader
        async with self._queue:
            if not self.is_serving() or self.raft is None:
                return not_leader
            with self.lock:
                result = check()
            if write and result.events:
                committed = await self.raft.propose(result.events, WAIT_TIMEOUT_S)
                if not committed:
                    if not self.is_serving():
                        return not_leader
                    return ControllerResult().fail(ResponseCode.SYSTEM_ERROR,
                                                   "the controller could not commit the event in time")
            elif self.config.process_read_event:
                if not await self.raft.propose([], WAIT_TIMEOUT_S):
                    return not_leader
            return result

    # -- elections -----------------------------------------------------------------------------------------

    async def elect(self, header: ElectMasterRequestHeader, trigger: str) -> ControllerResult:
        result = await self.run(lambda: self.state.elect_master(header, self.policy))
        if result.code == ResponseCode.SUCCESS:
            self._after_election(header.broker_name, result, trigger)
        return result

    def _after_election(self, broker_name: str, result: ControllerResult, trigger: str) -> None:
        h = result.header
        assert isinstance(h, ElectMasterResponseHeader)
        master_id, epoch = h.master_broker_id, h.master_epoch or 0
        log.warning("elected broker %d master of %s, masterEpoch %d (%s-triggered)", master_id, broker_name,
                    epoch, trigger)
        for listener in self.election_listeners:
            listener(Election(broker_name, master_id, epoch, trigger))
        if self.config.notify_broker_role_changed and result.body is not None:
            self.notify_role_changed(result)

    async def trigger_elect(self, broker_name: str) -> bool:
        """A controller-triggered election, tried electMasterMaxRetryCount times (each ≤ 3 s)."""
        for attempt in range(max(1, self.config.elect_master_max_retry_count)):
            try:
                result = await asyncio.wait_for(
                    self.elect(ElectMasterRequestHeader(broker_name=broker_name, broker_id=-1), "controller"),
                    ELECT_TRY_TIMEOUT_S)
            except TimeoutError:
                log.warning("election in %s timed out (try %d)", broker_name, attempt + 1)
                continue
            if result.code == ResponseCode.SUCCESS:
                return True
            if result.code == C.CONTROLLER_NOT_LEADER:
                return False
            log.warning("election in %s: %d %s (try %d)", broker_name, result.code, result.remark, attempt + 1)
        return False

    def on_broker_inactive(self, cluster: str | None, broker_name: str, broker_id: int | None) -> None:
        if not self.is_serving():
            log.info("broker %s/%s inactive (not the leader: nothing to do)", broker_name, broker_id)
            return
        if broker_id is not None:
            with self.lock:
                master = self.state.master_of(broker_name)
            if master != broker_id:
                log.info("broker %d of %s inactive (not its master)", broker_id, broker_name)
                return
        log.warning("master %s of %s inactive: electing", broker_id, broker_name)
        self._spawn(self.trigger_elect(broker_name))

    # -- notifications -------------------------------------------------------------------------------------

    def notify_role_changed(self, result: ControllerResult) -> None:
        h = result.header
        assert isinstance(h, ElectMasterResponseHeader)
        body = decode_elect_master_body(result.body or b"{}")
        group = body.broker_member_group
        if group is None or h.master_broker_id is None:
            return
        header = NotifyBrokerRoleChangedRequestHeader(h.master_address, h.master_epoch, h.sync_state_set_epoch,
                                                      h.master_broker_id)
        sss = encode_sync_state_set(body.sync_state_set, header.sync_state_set_epoch or 0)
        for broker_id, addr in sorted(group.broker_addrs.items()):
            if addr and self.is_alive(group.cluster, group.broker_name, broker_id):
                self._notify_broker(addr, header, sss)

    def _notify_broker(self, addr: str, header: NotifyBrokerRoleChangedRequestHeader, body: bytes) -> None:
        epoch = header.master_epoch or 0
        old = self._notify.get(addr)
        if old is not None and epoch > old[0] and not old[1].done():
            old[1].cancel()

        async def send() -> None:
            cmd = RemotingCommand.request(ControllerRequestCode.NOTIFY_BROKER_ROLE_CHANGED, header.to_ext(), body,
                                          oneway=True)
            try:
                await asyncio.wait_for(self.client.invoke_oneway(addr, cmd), NOTIFY_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                log.warning("could not tell %s its role changed: %s", addr, exc)
            finally:
                if self._notify.get(addr, (0, None))[1] is task:
                    del self._notify[addr]

        task = asyncio.ensure_future(send())
        self._notify[addr] = (epoch, task)

    # -- heartbeats and scans ------------------------------------------------------------------------------

    def on_channel_close(self, channel: Any) -> None:
        for cluster, broker_name, broker_id in self.heartbeats.on_channel_close(channel):
            log.info("connection of broker %s/%d closed: inactive", broker_name, broker_id)
            self.on_broker_inactive(cluster, broker_name, broker_id)

    async def _scan_not_active_brokers(self) -> None:
        await asyncio.sleep(min(2.0, self.config.scan_not_active_broker_interval_ms / 1000))
        while True:
            for (cluster, broker_name, broker_id), info in self.heartbeats.scan():
                log.warning("broker %s/%d (%s) sent no heartbeat for %d ms: inactive", broker_name, broker_id,
                            info.broker_addr, info.timeout_ms)
                close = getattr(info.channel, "close", None)
                if callable(close):
                    close()
                self.on_broker_inactive(cluster, broker_name, broker_id)
            await asyncio.sleep(self.config.scan_not_active_broker_interval_ms / 1000)

    async def _scan_inactive_masters(self) -> None:
        while self.is_serving():
            await asyncio.sleep(self.config.scan_inactive_master_interval_ms / 1000)
            if not self.is_serving():
                return
            with self.lock:
                names = self.state.scan_need_reelect(self.is_alive)
            for name in names:
                self.on_broker_inactive(None, name, None)

    def _serving_changed(self, serving: bool) -> None:
        if serving:
            if self._scan_master_task is None or self._scan_master_task.done():
                self._scan_master_task = self._spawn(self._scan_inactive_masters())
        elif self._scan_master_task is not None:
            self._scan_master_task.cancel()
            self._scan_master_task = None

    def _events_applied(self, events: list[Event]) -> None:  # the raft thread, every node
        for event in events:
            if isinstance(event, ElectMasterEvent) and not event.new_master_elected:
                log.warning("%s has no master: nothing electable", event.broker_name)
