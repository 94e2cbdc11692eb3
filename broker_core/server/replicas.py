"""ReplicasManager: a broker's side of controller mode (RocketMQ 5 ``ReplicasManager``; reference
``rocketmq-controller.md`` §3.1, §3.3 step 8, §3.4, §3.5).

- Start (§3.1): the broker is fenced (no name-server registration, puts refused). Find the controller leader
  (1005), get a controller id (``brokerIdentity`` file, else 1012 + ``brokerIdentity-temp`` + 1013), register
  (1003); a live master in the answer gives the role; otherwise one heartbeat and a self-election (1002).
- Running: heartbeats (904, oneway) to every controller each ``brokerHeartbeatInterval``; the replica-info poll
  (1004) each ``syncBrokerMetadataPeriod``; on the master the SyncStateSet check each ``checkSyncStateSetPeriod``
  and expansions as acks arrive (1001); NOTIFY_BROKER_ROLE_CHANGED (1008) from the controller leader.
- A role change applies only with a master epoch above the local one (§3.5), then re-registers with the name
  servers with DataVersion ``stateVersion`` = master epoch.
- GET_BROKER_EPOCH_CACHE (1007) answers the epoch file.

Invariant: every role the broker takes comes from a controller answer carrying its epoch, and epochs only grow
here, so a stale notification or poll answer never moves the broker back.

Crash behaviour: the only files written are the broker identity files (``server/broker_identity.py``); the role
is not persisted: a restarted broker starts fenced and asks the controller again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ControllerRequestCode,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    EpochEntry,
    EpochEntryCache,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    decode_elect_master_body,
    decode_sync_state_set,
    encode_epoch_entry_cache,
    encode_sync_state_set,
)
from broker_core.remoting.client import RemotingClient
from broker_core.server.broker_identity import BrokerIdentityFiles

if TYPE_CHECKING:
    from broker_core.ha.autoswitch import AutoSwitchBrokerHA
    from broker_core.remoting.server import Connection, Handler
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

CODE = ControllerRequestCode
RC = ControllerResponseCode
CALL_TIMEOUT_S = 3.0
RETRY_S = 5.0


class ControllerUnavailable(ConnectionError):
    """No controller leader answered."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicasManager:
    def __init__(self, ctl: Broker, ha: AutoSwitchBrokerHA) -> None:
        self.ctl = ctl
        self.ha = ha
        self.config = ctl.config
        self.cc = ctl.config.controller
        self.controllers = [a.strip() for a in self.cc.controller_addr.split(";") if a.strip()]
        self.client = RemotingClient(connect_timeout=1.0, serialize_type=SERIALIZE_JSON)
        self.leader = ""
        self.broker_id = -1  # the controller id
        self.sss_epoch = 0
        self.elections_seen = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._hb_tasks: dict[str, asyncio.Task[None]] = {}
        self._alter_lock = asyncio.Lock()
        self._changes = asyncio.Lock()
        self.identity = BrokerIdentityFiles(
            Path(self.cc.store_path_broker_identity or Path(self.config.store.store_path_root_dir) / "brokerIdentity"),
            self.config.broker_cluster_name, self.config.broker_name)
        ha.service.on_expand = self._expand
        ha.service.on_connection_lost = self._shrink_now

    @property
    def state_version(self) -> int:
        return self.ha.master_epoch

    def handlers(self) -> dict[int, Handler]:
        return {int(CODE.NOTIFY_BROKER_ROLE_CHANGED): self._on_notify,
                int(CODE.GET_BROKER_EPOCH_CACHE): self._on_epoch_cache}

    def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._run()))

    async def shutdown(self) -> None:
        self.ha.service.on_connection_lost = None  # the slaves' connections close with us: no shrink for that
        self.ha.service.on_expand = None
        for t in [*self._tasks, *self._hb_tasks.values()]:
            t.cancel()
        await asyncio.gather(*self._tasks, *self._hb_tasks.values(), return_exceptions=True)
        await self.client.close()

    # ------------------------------------------------------------------ calls
    async def _find_leader(self) -> str:
        for addr in self.controllers:
            try:
                resp = await self.client.invoke(addr, RemotingCommand.request(CODE.CONTROLLER_GET_METADATA_INFO),
                                                CALL_TIMEOUT_S)
            except (ConnectionError, TimeoutError):
                continue
            if resp.code != ResponseCode.SUCCESS:
                continue
            h = GetMetaDataResponseHeader.from_ext(resp.header)
            if h.controller_leader_address:
                self.leader = h.controller_leader_address
                return self.leader
        raise ControllerUnavailable(f"no controller leader among {self.controllers}")

    async def _call(self, code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
        """A request to the leader; NOT_LEADER or a broken connection looks the leader up again (once)."""
        for attempt in range(2):
            leader = self.leader or await self._find_leader()
            cmd = RemotingCommand.request(code, header.to_ext() if header is not None else {}, body)
            try:
                resp = await self.client.invoke(leader, cmd, CALL_TIMEOUT_S)
            except (ConnectionError, TimeoutError):
                self.leader = ""
                if attempt:
                    raise
                continue
            if resp.code == RC.CONTROLLER_NOT_LEADER and not attempt:
                self.leader = ""
                continue
            return resp
        raise ControllerUnavailable("no controller leader")

    # ------------------------------------------------------------------ start-up (§3.1)
    async def _run(self) -> None:
        while True:
            try:
                await self._find_leader()
                if await self._register():
                    break
            except (ConnectionError, TimeoutError, ValueError) as exc:
                log.warning("controller mode start: %s; retrying in %.0f s", exc, RETRY_S)
            await asyncio.sleep(RETRY_S)
        for addr in self.controllers:
            self._hb_tasks[addr] = asyncio.ensure_future(self._heartbeats(addr))
        self._tasks.append(asyncio.ensure_future(self._poll()))
        self._tasks.append(asyncio.ensure_future(self._check_sync_state_set()))
        self._tasks.append(asyncio.ensure_future(self._learn_master_ha()))

    async def _apply_id(self) -> int:
        cfg = self.config
        found = self.identity.read()
        if found is not None and found[1] is None:
            return found[0]
        if found is None:
            resp = await self._call(CODE.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(
                cfg.broker_cluster_name, cfg.broker_name))
            if resp.code != ResponseCode.SUCCESS:
                raise ValueError(f"1012 answered {resp.code} {resp.remark}")
            next_id = GetNextBrokerIdResponseHeader.from_ext(resp.header).next_broker_id or 1
            code = f"{self.ctl.broker_addr};{_now_ms()}"
            self.identity.write_temp(next_id, code)
            found = (next_id, code)
        broker_id, check = found
        resp = await self._call(CODE.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
            cfg.broker_cluster_name, cfg.broker_name, broker_id, check))
        if resp.code != ResponseCode.SUCCESS:
            self.identity.refused()
            raise ValueError(f"1013 for id {broker_id} answered {resp.code} {resp.remark}")
        self.identity.accepted(broker_id)
        return broker_id

    async def _register(self) -> bool:
        cfg = self.config
        for _ in range(5):
            try:
                self.broker_id = await self._apply_id()
                break
            except ValueError as exc:
                log.warning("controller id: %s", exc)
                await asyncio.sleep(random.random())
        else:
            return False
        resp = await self._call(CODE.CONTROLLER_REGISTER_BROKER, RegisterBrokerToControllerRequestHeader(
            cfg.broker_cluster_name, cfg.broker_name, self.broker_id, self.ctl.broker_addr, _now_ms()))
        if resp.code != ResponseCode.SUCCESS:
            log.warning("1003 answered %d %s", resp.code, resp.remark)
            return False
        h = RegisterBrokerToControllerResponseHeader.from_ext(resp.header)
        sss = decode_sync_state_set(resp.body) if resp.body else None
        if h.master_broker_id is not None and h.master_address:
            await self.apply_role(h.master_broker_id, h.master_address, h.master_epoch or 0,
                                  set(sss.sync_state_set) if sss else set(), h.sync_state_set_epoch or 0)
            return True
        await self._heartbeat_once(self.leader)
        return await self._elect_self()

    async def _elect_self(self) -> bool:
        cfg = self.config
        resp = await self._call(CODE.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(
            cfg.broker_cluster_name, cfg.broker_name, self.broker_id, False, _now_ms()))
        if resp.code not in (ResponseCode.SUCCESS, RC.CONTROLLER_MASTER_STILL_EXIST):
            log.info("self-election answered %d %s", resp.code, resp.remark)
            return False
        h = ElectMasterResponseHeader.from_ext(resp.header)
        body = decode_elect_master_body(resp.body) if resp.body else None
        if h.master_broker_id is None or not h.master_address:
            return False
        await self.apply_role(h.master_broker_id, h.master_address, h.master_epoch or 0,
                              set(body.sync_state_set) if body else set(), h.sync_state_set_epoch or 0)
        return True

    # ------------------------------------------------------------------ role (§3.5)
    async def apply_role(self, master_id: int, master_addr: str, epoch: int, sss: set[int], sss_epoch: int) -> None:
        async with self._changes:
            ha = self.ha
            if epoch < ha.master_epoch or (epoch == ha.master_epoch and not ha.fenced):
                if epoch == ha.master_epoch and ha.is_master and master_id == self.broker_id:
                    ha.service.set_sync_state_set(sss | {self.broker_id}, sss_epoch)
                return
            self.elections_seen += 1
            if master_id == self.broker_id:
                await ha.change_to_master(self.broker_id, epoch, sss, sss_epoch)
            else:
                await ha.change_to_slave(self.broker_id, epoch, master_addr)
            self.ctl.topics.data_version += 1  # DataVersion.nextVersion(stateVersion = masterEpoch)
            self.ctl.topics.data_version_ts = _now_ms()
        await self.ctl.register_all()

    async def _on_notify(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = NotifyBrokerRoleChangedRequestHeader.from_ext(cmd.header)
        sss = decode_sync_state_set(cmd.body) if cmd.body else None
        log.info("NOTIFY_BROKER_ROLE_CHANGED: master %s (%s), epoch %s", h.master_broker_id, h.master_address,
                 h.master_epoch)
        if h.master_broker_id is not None and h.master_address and h.master_epoch is not None:
            self.ctl.spawn(self.apply_role(h.master_broker_id, h.master_address, h.master_epoch,
                                           set(sss.sync_state_set) if sss else set(), h.sync_state_set_epoch or 0))
        return cmd.response(ResponseCode.SUCCESS)

    def _on_epoch_cache(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        entries = self.ha.epochs.entries()
        cache = EpochEntryCache(self.config.broker_cluster_name, self.config.broker_name,
                                0 if self.ha.is_master else self.broker_id,
                                tuple(EpochEntry(e.epoch, e.start_offset, e.end_offset) for e in entries),
                                self.ctl.store.max_phy_offset())
        resp = cmd.response(ResponseCode.SUCCESS)
        resp.body = encode_epoch_entry_cache(cache)
        return resp

    # ------------------------------------------------------------------ running
    def _heartbeat_cmd(self) -> RemotingCommand:
        cfg = self.config
        confirm = self.ha.service.confirm() if self.ha.is_master else (
            self.ha.client.confirm_offset if self.ha.client is not None else -1)
        h = BrokerHeartbeatRequestHeader(
            cfg.broker_cluster_name, self.ctl.broker_addr, cfg.broker_name, self.broker_id,
            self.ha.epochs.last_epoch(), self.ctl.store.max_phy_offset(), confirm,
            self.cc.controller_heartbeat_timeout_ms, self.cc.broker_election_priority)
        return RemotingCommand.request(CODE.BROKER_HEARTBEAT, h.to_ext(), oneway=True)

    async def _heartbeat_once(self, addr: str) -> None:
        try:
            await self.client.invoke_oneway(addr, self._heartbeat_cmd())
        except (ConnectionError, OSError, TimeoutError):
            self.client.close_channel(addr)

    async def _heartbeats(self, addr: str) -> None:
        period = self.cc.broker_heartbeat_interval_ms / 1000
        while True:
            await self._heartbeat_once(addr)
            await asyncio.sleep(period)

    async def _poll(self) -> None:
        """§3.3 step 8: the 1004 poll repairs a missed notification."""
        cfg = self.config
        while True:
            await asyncio.sleep(self.cc.sync_broker_metadata_period_ms / 1000)
            first = self.ctl.store.min_phy_offset()
            if first > 0:  # CommitLog files expired: their epochs go too (§4.1)
                self.ha.epochs.truncate_prefix_by_offset(first)
            try:
                resp = await self._call(CODE.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(cfg.broker_name))
            except (ConnectionError, TimeoutError) as exc:
                log.info("replica info poll: %s", exc)
                continue
            if resp.code != ResponseCode.SUCCESS:
                continue
            h = GetReplicaInfoResponseHeader.from_ext(resp.header)
            sss = decode_sync_state_set(resp.body) if resp.body else None
            epoch = h.master_epoch or 0
            if epoch > self.ha.master_epoch:
                if h.master_broker_id is not None and h.master_address:
                    await self.apply_role(h.master_broker_id, h.master_address, epoch,
                                          set(sss.sync_state_set) if sss else set(), sss.sync_state_set_epoch
                                          if sss else 0)
                else:
                    try:
                        await self._elect_self()
                    except (ConnectionError, TimeoutError):
                        pass
            elif self.ha.is_master and sss is not None and epoch == self.ha.master_epoch:
                self.ha.service.set_sync_state_set(set(sss.sync_state_set), sss.sync_state_set_epoch)

    async def _learn_master_ha(self) -> None:
        """A slave registers again every 500 ms until the name server names its announced master (the slave's only
        source of the master's HA address, §3.6)."""
        while True:
            await asyncio.sleep(0.5)
            ha = self.ha
            if not ha.fenced and not ha.is_master and not ha.master_ha_addr():
                await self.ctl.register_all()

    # ------------------------------------------------------------------ SyncStateSet (§3.4)
    def _expand(self, new_set: set[int]) -> None:
        self.ctl.spawn(self._alter(new_set))

    def _shrink_now(self) -> None:
        """A member's HA connection dropped: check the set at once, not at the next period (§3.4)."""
        self.ctl.spawn(self._shrink())

    async def _shrink(self) -> None:
        service = self.ha.service
        if self.ha.is_master:
            keep = service.members_to_keep()
            if keep != service.sync_state_set:
                await self._alter(keep)

    async def _check_sync_state_set(self) -> None:
        while True:
            await asyncio.sleep(self.cc.check_sync_state_set_period_ms / 1000)
            await self._shrink()

    async def _alter(self, new_set: set[int]) -> None:
        async with self._alter_lock:
            ha, service = self.ha, self.ha.service
            if not ha.is_master or new_set == service.sync_state_set or self.broker_id not in new_set:
                return
            service.propose(new_set)
            try:
                resp = await self._call(CODE.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(
                    self.config.broker_name, self.broker_id, ha.master_epoch, _now_ms()),
                    encode_sync_state_set(new_set, service.sync_state_set_epoch))
            except (ConnectionError, TimeoutError) as exc:
                log.warning("SyncStateSet change to %s: %s", sorted(new_set), exc)
                service.clear_pending()
                return
            if resp.code == ResponseCode.SUCCESS:
                h = AlterSyncStateSetResponseHeader.from_ext(resp.header)
                sss = decode_sync_state_set(resp.body) if resp.body else None
                members = set(sss.sync_state_set) if sss else new_set
                service.set_sync_state_set(members, sss.sync_state_set_epoch if sss else h.new_sync_state_set_epoch)
                log.info("SyncStateSet is now %s (epoch %d)", sorted(members), service.sync_state_set_epoch)
            else:
                log.warning("SyncStateSet change to %s refused: %d %s", sorted(new_set), resp.code, resp.remark)
            service.clear_pending()

