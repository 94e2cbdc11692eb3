"""The controller's per broker-set records (RocketMQ's ``BrokerReplicaInfo`` and ``SyncStateInfo``) and the result
of a request check (``ControllerResult``). Plain data: :class:`~broker_core.controller.replicas.ReplicasInfoManager`
owns them and changes them only while applying events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker_core.controller.events import Event
from broker_core.protocol.codes import ResponseCode
from broker_core.protocol.controller import _Header

FIRST_BROKER_CONTROLLER_ID = 1


@dataclass
class BrokerReplicaInfo:
    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    brokers: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (address, registerCheckCode)

    def address(self, broker_id: int | None) -> str | None:
        if broker_id is None:
            return None
        entry = self.brokers.get(broker_id)
        return entry[0] if entry else None

    def add(self, broker_id: int, address: str, check_code: str) -> None:
        self.brokers[broker_id] = (address, check_code)
        self.next_assign_broker_id += 1


@dataclass
class SyncStateInfo:
    cluster_name: str
    broker_name: str
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    master_broker_id: int | None = None

    def update_master(self, broker_id: int | None) -> None:
        self.master_broker_id = broker_id
        self.master_epoch += 1

    def update_sync_state_set(self, ids: Iterable[int]) -> None:
        self.sync_state_set = set(ids)
        self.sync_state_set_epoch += 1


@dataclass
class ControllerResult:
    """A response to send once ``events`` are committed (no events: at once)."""

    code: int = ResponseCode.SUCCESS
    remark: str = ""
    header: _Header | None = None
    body: bytes | None = None
    events: list[Event] = field(default_factory=list)

    def fail(self, code: int, remark: str) -> ControllerResult:
        self.code, self.remark = int(code), remark
        return self
