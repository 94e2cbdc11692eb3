"""ReplicasInfoManager: the controller's replicated state per broker-set, and the checks of every request that
reads or changes it (RocketMQ's ``ReplicasInfoManager``, reference §1, §3.3, §3.4, §6).

Invariants:
1. The tables change only in :meth:`ReplicasInfoManager.apply`, from events that came out of the raft log, in
   log order, on every controller alike. Request methods only read and return a :class:`ControllerResult`:
   the response and the events that, once committed, make it true.
2. ``apply`` is deterministic: it reads nothing but the event and the tables (no clock, no liveness).
3. A broker-set is known when it is in both tables (``replica_info`` and ``sync_state_info``).
4. Crash: the state is rebuilt from pysyncobj's dump and journal (:meth:`snapshot` / :meth:`restore` give the
   dump's JSON form); nothing here touches a file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker_core.controller.elect import AlivePredicate, DefaultElectPolicy
from broker_core.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)
from broker_core.controller.tables import (
    FIRST_BROKER_CONTROLLER_ID,
    BrokerReplicaInfo,
    ControllerResult,
    SyncStateInfo,
)
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    BrokerMemberGroup,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    encode_broker_replicas_info,
    encode_elect_master_body,
    encode_sync_state_set,
)
from broker_core.protocol.controller import ControllerResponseCode as C


def _never_alive(cluster: str, broker_name: str, broker_id: int) -> bool:
    return False


class ReplicasInfoManager:
    def __init__(self, enable_elect_unclean_master: bool = False) -> None:
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.replica_info: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_info: dict[str, SyncStateInfo] = {}

    def known(self, broker_name: str | None) -> bool:
        return broker_name in self.replica_info and broker_name in self.sync_state_info

    # -- requests (read only) -------------------------------------------------------------------------------

    def alter_sync_state_set(self, req: AlterSyncStateSetRequestHeader, sss: SyncStateSet,
                             alive: AlivePredicate) -> ControllerResult:
        """1001, checks in RocketMQ's order (§3.4)."""
        result = ControllerResult(header=AlterSyncStateSetResponseHeader())
        name = req.broker_name
        if not self.known(name):
            return result.fail(C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
        assert name is not None
        info, replicas = self.sync_state_info[name], self.replica_info[name]
        new = set(sss.sync_state_set)
        if new == info.sync_state_set:
            return result.fail(C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
        if info.master_broker_id is None or info.master_broker_id != req.master_broker_id:
            return result.fail(C.CONTROLLER_INVALID_MASTER,
                               f"Rejecting alter syncStateSet request because the current leader is:"
                               f"{{{info.master_broker_id}}}, not {{{req.master_broker_id}}}")
        if req.master_epoch != info.master_epoch:
            return result.fail(C.CONTROLLER_FENCED_MASTER_EPOCH,
                               f"Rejecting alter syncStateSet request because the current master epoch is:"
                               f"{{{info.master_epoch}}}, not {{{req.master_epoch}}}")
        if sss.sync_state_set_epoch != info.sync_state_set_epoch:
            return result.fail(C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                               f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                               f"{{{info.sync_state_set_epoch}}}, not {{{sss.sync_state_set_epoch}}}")
        for replica in sorted(new):
            if replica not in replicas.brokers:
                return result.fail(C.CONTROLLER_INVALID_REPLICAS,
                                   f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                                   f"don't exist")
            if not alive(replicas.cluster_name, name, replica):
                return result.fail(C.CONTROLLER_BROKER_NOT_ALIVE,
                                   f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                                   f"don't alive")
        if info.master_broker_id not in new:
            return result.fail(C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
                               f"origin leader {{{info.master_broker_id}}}")
        epoch = info.sync_state_set_epoch + 1
        result.header = AlterSyncStateSetResponseHeader(epoch)
        result.body = encode_sync_state_set(new, epoch)
        result.events.append(AlterSyncStateSetEvent(name, frozenset(new)))
        return result

    def elect_master(self, req: ElectMasterRequestHeader, policy: DefaultElectPolicy) -> ControllerResult:
        """1002 (§3.3). ``req.broker_id`` -1 (or None) means controller-triggered."""
        result = ControllerResult(header=ElectMasterResponseHeader())
        name = req.broker_name
        if not self.known(name):
            return result.fail(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        info, replicas = self.sync_state_info[name], self.replica_info[name]
        old_master = info.master_broker_id
        all_replicas = set(replicas.brokers) if self.enable_elect_unclean_master else None
        new_master: int | None = None
        if info.master_epoch == 0:  # the first election: the requester wins, unchecked
            new_master = req.broker_id
        if new_master is None or new_master == -1:
            prefer = req.broker_id if req.designate_elect else None
            new_master = policy.elect(replicas.cluster_name, name, info.sync_state_set, all_replicas, old_master,
                                      prefer)
        if new_master is not None and new_master == old_master:
            result.header = ElectMasterResponseHeader(old_master, replicas.address(old_master), info.master_epoch,
                                                      info.sync_state_set_epoch)
            result.body = encode_elect_master_body(info.sync_state_set)
            return result.fail(C.CONTROLLER_MASTER_STILL_EXIST,
                               f"The old master {old_master} is still alive, not need to elect new master for "
                               f"broker {name}")
        if new_master is not None:
            result.header = ElectMasterResponseHeader(new_master, replicas.address(new_master),
                                                      info.master_epoch + 1, info.sync_state_set_epoch + 1)
            group = BrokerMemberGroup(replicas.cluster_name, name,
                                      {i: a for i, (a, _) in sorted(replicas.brokers.items())})
            result.body = encode_elect_master_body({new_master}, group)
            result.events.append(ElectMasterEvent(name, True, new_master))
            return result
        if req.broker_id is None or req.broker_id == -1:
            result.events.append(ElectMasterEvent(name, False))
            return result.fail(C.CONTROLLER_MASTER_NOT_AVAILABLE,
                               "Old master has down and failed to elect a new broker master")
        return result.fail(C.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def get_next_broker_id(self, req: GetNextBrokerIdRequestHeader) -> ControllerResult:
        """1012."""
        replicas = self.replica_info.get(req.broker_name or "")
        nxt = FIRST_BROKER_CONTROLLER_ID if replicas is None else replicas.next_assign_broker_id
        return ControllerResult(header=GetNextBrokerIdResponseHeader(req.cluster_name, req.broker_name, nxt))

    def apply_broker_id(self, req: ApplyBrokerIdRequestHeader) -> ControllerResult:
        """1013 (§3.1 step 2.3)."""
        result = ControllerResult(header=ApplyBrokerIdResponseHeader(req.cluster_name, req.broker_name))
        name, broker_id, code = req.broker_name or "", req.applied_broker_id, req.register_check_code or ""
        if broker_id is None:
            return result.fail(C.CONTROLLER_BROKER_ID_INVALID, "appliedBrokerId is required")
        event = ApplyBrokerIdEvent(req.cluster_name or "", name, code.split(";")[0], broker_id, code)
        replicas = self.replica_info.get(name)
        if replicas is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                result.events.append(event)
                return result
            return result.fail(C.CONTROLLER_BROKER_ID_INVALID,
                               f"Broker-set: {name} hasn't been registered in controller, but broker try to apply "
                               f"brokerId: {broker_id}")
        if broker_id not in replicas.brokers or replicas.brokers[broker_id][1] == code:
            result.events.append(event)
            return result
        return result.fail(C.CONTROLLER_BROKER_ID_INVALID, f"Fail to apply brokerId: {broker_id} in broker-set: {name}")

    def register_broker(self, req: RegisterBrokerToControllerRequestHeader, alive: AlivePredicate) -> ControllerResult:
        """1003 (§3.1 step 2.4)."""
        result = ControllerResult(header=RegisterBrokerToControllerResponseHeader(req.cluster_name, req.broker_name))
        name = req.broker_name
        if not self.known(name):
            return result.fail(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"Broker-set: {name} hasn't been registered in controller")
        assert name is not None
        info, replicas = self.sync_state_info[name], self.replica_info[name]
        if req.broker_id not in replicas.brokers:
            return result.fail(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"BrokerId: {req.broker_id} hasn't been registered in broker-set: {name}")
        assert req.broker_id is not None
        master = info.master_broker_id
        if master is not None and alive(req.cluster_name or "", name, master):
            result.header = RegisterBrokerToControllerResponseHeader(
                req.cluster_name, req.broker_name, master, replicas.address(master), info.master_epoch,
                info.sync_state_set_epoch)
        result.body = encode_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
        if req.broker_address != replicas.address(req.broker_id):
            result.events.append(UpdateBrokerAddressEvent(req.cluster_name or "", name, req.broker_address or "",
                                                          req.broker_id))
        return result

    def get_replica_info(self, req: GetReplicaInfoRequestHeader) -> ControllerResult:
        """1004."""
        name = req.broker_name
        if not self.known(name):
            return ControllerResult(header=GetReplicaInfoResponseHeader()).fail(
                C.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        assert name is not None
        info, replicas = self.sync_state_info[name], self.replica_info[name]
        return ControllerResult(
            header=GetReplicaInfoResponseHeader(info.master_broker_id, replicas.address(info.master_broker_id),
                                                info.master_epoch),
            body=encode_sync_state_set(info.sync_state_set, info.sync_state_set_epoch))

    def replicas_info(self, names: Iterable[str], alive: AlivePredicate) -> dict[str, ReplicasInfo]:
        """1006's table for the known names among ``names``."""
        out: dict[str, ReplicasInfo] = {}
        for name in names:
            if not self.known(name):
                continue
            info, replicas = self.sync_state_info[name], self.replica_info[name]
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, (addr, _) in sorted(replicas.brokers.items()):
                r = ReplicaIdentity(name, broker_id, addr, alive(replicas.cluster_name, name, broker_id))
                (in_sync if broker_id in info.sync_state_set else not_in_sync).append(r)
            out[name] = ReplicasInfo(info.master_broker_id, replicas.address(info.master_broker_id),
                                     info.master_epoch, info.sync_state_set_epoch, tuple(in_sync),
                                     tuple(not_in_sync))
        return out

    def get_sync_state_data(self, names: Iterable[str], alive: AlivePredicate) -> ControllerResult:
        """1006."""
        return ControllerResult(body=encode_broker_replicas_info(self.replicas_info(names, alive)))

    def clean_broker_data(self, req: CleanControllerBrokerDataRequestHeader, alive: AlivePredicate) -> ControllerResult:
        """1011 (§6)."""
        result = ControllerResult()
        name, ids_text = req.broker_name, req.broker_controller_ids_to_clean
        ids: frozenset[int] | None = None
        if not req.is_clean_living_broker:
            info = self.sync_state_info.get(name)
            if not (ids_text or "").strip() and info is not None and info.master_broker_id is not None:
                return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   f"Broker {name} is still alive, clean up failure")
        if (ids_text or "").strip():
            try:
                ids = frozenset(int(p) for p in (ids_text or "").split(";"))
            except ValueError as exc:
                return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   f"Please set the option <brokerControllerIdsToClean> according to the format, "
                                   f"exception: {exc}")
            if not req.is_clean_living_broker:
                for broker_id in sorted(ids):
                    if alive(req.cluster_name or "", name, broker_id):
                        return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                           f"Broker [{name},  {broker_id}] is still alive, clean up failure")
        if self.known(name):
            result.events.append(CleanBrokerDataEvent(name, ids))
            return result
        return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                           f"Broker {name} is not existed,clean broker data failure.")

    def scan_need_reelect(self, alive: AlivePredicate) -> list[str]:
        """Broker-sets whose master is dead while some replica is alive (the leader's inactive-master scan)."""
        out = []
        for name, info in sorted(self.sync_state_info.items()):
            master = info.master_broker_id
            replicas = self.replica_info.get(name)
            if master is None or replicas is None or alive(info.cluster_name, name, master):
                continue
            if any(alive(info.cluster_name, name, i) for i in replicas.brokers):
                out.append(name)
        return out

    def master_of(self, broker_name: str) -> int | None:
        info = self.sync_state_info.get(broker_name)
        return None if info is None else info.master_broker_id

    # -- events (the only writes) ---------------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        if isinstance(event, AlterSyncStateSetEvent):
            if self.known(event.broker_name):
                self.sync_state_info[event.broker_name].update_sync_state_set(event.new_sync_state_set)
        elif isinstance(event, ApplyBrokerIdEvent):
            if self.known(event.broker_name):
                replicas = self.replica_info[event.broker_name]
                if event.new_broker_id not in replicas.brokers:
                    replicas.add(event.new_broker_id, event.broker_address, event.register_check_code)
            else:
                replicas = BrokerReplicaInfo(event.cluster_name, event.broker_name)
                replicas.add(event.new_broker_id, event.broker_address, event.register_check_code)
                self.replica_info[event.broker_name] = replicas
                self.sync_state_info[event.broker_name] = SyncStateInfo(event.cluster_name, event.broker_name)
        elif isinstance(event, ElectMasterEvent):
            if self.known(event.broker_name):
                info = self.sync_state_info[event.broker_name]
                if event.new_master_elected:
                    info.update_master(event.new_master_broker_id)
                    info.update_sync_state_set({event.new_master_broker_id} if event.new_master_broker_id
                                               is not None else set())
                else:
                    info.update_master(None)
        elif isinstance(event, CleanBrokerDataEvent):
            self._clean(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            replicas_or_none = self.replica_info.get(event.broker_name)
            if replicas_or_none is not None and event.broker_id in replicas_or_none.brokers:
                _, code = replicas_or_none.brokers[event.broker_id]
                replicas_or_none.brokers[event.broker_id] = (event.broker_address, code)

    def _clean(self, event: CleanBrokerDataEvent) -> None:
        name = event.broker_name
        if not event.broker_id_set_to_clean:
            self.replica_info.pop(name, None)
            self.sync_state_info.pop(name, None)
            return
        if not self.known(name):
            return
        replicas, info = self.replica_info[name], self.sync_state_info[name]
        for broker_id in event.broker_id_set_to_clean:
            replicas.brokers.pop(broker_id, None)
            info.sync_state_set.discard(broker_id)
        if not replicas.brokers:
            del self.replica_info[name]
        if not info.sync_state_set:
            del self.sync_state_info[name]

    # -- snapshot (pysyncobj's dump) ------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The tables as plain JSON-able data."""
        return {
            "replicaInfoTable": {n: {"clusterName": r.cluster_name, "nextAssignBrokerId": r.next_assign_broker_id,
                                     "brokers": [[i, a, c] for i, (a, c) in sorted(r.brokers.items())]}
                                 for n, r in sorted(self.replica_info.items())},
            "syncStateSetInfoTable": {n: {"clusterName": s.cluster_name, "masterEpoch": s.master_epoch,
                                          "syncStateSetEpoch": s.sync_state_set_epoch,
                                          "syncStateSet": sorted(s.sync_state_set),
                                          "masterBrokerId": s.master_broker_id}
                                      for n, s in sorted(self.sync_state_info.items())},
        }

    def restore(self, data: dict[str, Any]) -> None:
        self.replica_info = {
            n: BrokerReplicaInfo(d["clusterName"], n, int(d["nextAssignBrokerId"]),
                                 {int(i): (str(a), str(c)) for i, a, c in d["brokers"]})
            for n, d in data.get("replicaInfoTable", {}).items()}
        self.sync_state_info = {
            n: SyncStateInfo(d["clusterName"], n, int(d["masterEpoch"]), int(d["syncStateSetEpoch"]),
                             {int(i) for i in d["syncStateSet"]},
                             None if d["masterBrokerId"] is None else int(d["masterBrokerId"]))
            for n, d in data.get("syncStateSetInfoTable", {}).items()}
