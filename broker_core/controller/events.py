"""Controller events: the only things that change a controller's replicated state (reference §1).

A log entry is an event id as a big-endian i16 followed by the event as fastjson writes it (fields sorted by
name, nulls left out, sets as sorted arrays):

| id | event | fields |
|---|---|---|
| 1 | AlterSyncStateSet | brokerName, newSyncStateSet |
| 2 | ApplyBrokerId | clusterName, brokerName, brokerAddress, registerCheckCode, newBrokerId |
| 3 | ElectMaster | newMasterElected, brokerName, newMasterBrokerId |
| 4 | Read | (none; never logged here) |
| 5 | CleanBrokerData | brokerName, brokerIdSetToClean |
| 6 | UpdateBrokerAddress | clusterName, brokerName, brokerAddress, brokerId |

Sans-I/O: bytes in, dataclasses out. An entry that does not decode raises :class:`CodecError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Union

from broker_core.codec.errors import CodecError
from broker_core.codec.fastjson import dumps_fastjson, loads_fastjson

_ID = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetEvent:
    broker_name: str
    new_sync_state_set: frozenset[int]
    event_id = 1


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str
    event_id = 2


@dataclass(frozen=True, slots=True)
class ElectMasterEvent:
    broker_name: str
    new_master_elected: bool
    new_master_broker_id: int | None = None
    event_id = 3


@dataclass(frozen=True, slots=True)
class CleanBrokerDataEvent:
    broker_name: str
    broker_id_set_to_clean: frozenset[int] | None = None  # None or empty: the whole broker-set
    event_id = 5


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddressEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int
    event_id = 6


Event = Union[AlterSyncStateSetEvent, ApplyBrokerIdEvent, ElectMasterEvent,  # noqa: UP007 - runtime alias
              CleanBrokerDataEvent, UpdateBrokerAddressEvent]


def _doc(event: Event) -> dict[str, Any]:
    if isinstance(event, AlterSyncStateSetEvent):
        return {"brokerName": event.broker_name, "newSyncStateSet": sorted(event.new_sync_state_set)}
    if isinstance(event, ApplyBrokerIdEvent):
        return {"brokerAddress": event.broker_address, "brokerName": event.broker_name,
                "clusterName": event.cluster_name, "newBrokerId": event.new_broker_id,
                "registerCheckCode": event.register_check_code}
    if isinstance(event, ElectMasterEvent):
        doc: dict[str, Any] = {"brokerName": event.broker_name}
        if event.new_master_broker_id is not None:
            doc["newMasterBrokerId"] = event.new_master_broker_id
        doc["newMasterElected"] = event.new_master_elected
        return doc
    if isinstance(event, CleanBrokerDataEvent):
        doc = {}
        if event.broker_id_set_to_clean is not None:
            doc["brokerIdSetToClean"] = sorted(event.broker_id_set_to_clean)
        doc["brokerName"] = event.broker_name
        return doc
    return {"brokerAddress": event.broker_address, "brokerId": event.broker_id, "brokerName": event.broker_name,
            "clusterName": event.cluster_name}


def encode_event(event: Event) -> bytes:
    return _ID.pack(event.event_id) + dumps_fastjson(_doc(event)).encode()


def decode_event(entry: bytes) -> Event:
    if len(entry) < 2:
        raise CodecError(f"controller event of {len(entry)} bytes has no event id")
    (event_id,) = _ID.unpack_from(entry, 0)
    try:
        d = loads_fastjson(entry[2:])
        if not isinstance(d, dict):
            raise ValueError("the event is not a JSON object")
        if event_id == 1:
            return AlterSyncStateSetEvent(str(d["brokerName"]), frozenset(int(x) for x in d["newSyncStateSet"]))
        if event_id == 2:
            return ApplyBrokerIdEvent(str(d["clusterName"]), str(d["brokerName"]), str(d["brokerAddress"]),
                                      int(d["newBrokerId"]), str(d["registerCheckCode"]))
        if event_id == 3:
            mid = d.get("newMasterBrokerId")
            return ElectMasterEvent(str(d["brokerName"]), bool(d["newMasterElected"]),
                                    None if mid is None else int(mid))
        if event_id == 5:
            ids = d.get("brokerIdSetToClean")
            return CleanBrokerDataEvent(str(d["brokerName"]), None if ids is None else frozenset(int(x) for x in ids))
        if event_id == 6:
            return UpdateBrokerAddressEvent(str(d["clusterName"]), str(d["brokerName"]), str(d["brokerAddress"]),
                                            int(d["brokerId"]))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"controller event {event_id} does not decode: {exc!r}") from None
    raise CodecError(f"unknown controller event id {event_id}")
