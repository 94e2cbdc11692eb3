"""RocketMQ 5 controller mode on the wire (reference ``rocketmq-controller.md`` §2): request and response codes,
the header of each code, and the fastjson bodies. Sans-I/O; the codec is :mod:`broker_core.codec.fastjson`.

Codes live in their own enums: :class:`RequestCode` uses 900-911 for broker_core's own admin operations, and
RocketMQ's BROKER_HEARTBEAT is 904 there too; a server answering controller requests reads the code with
:class:`ControllerRequestCode`.

Headers are dataclasses whose attributes are the Java fields in snake_case; :meth:`_Header.to_ext` writes the
``extFields`` (camelCase, the Java field names, ``None`` left out, ints and booleans as text) and
:meth:`_Header.from_ext` reads them back (absent -> the default; a required field absent or a number that does not
parse -> :class:`BadRequest`). Java's boxed types map to ``X | None``; primitives to ``X`` with Java's default.

Bodies are written as fastjson writes a JavaBean: fields sorted by name, nulls left out, ``Map<Long,...>`` keys
bare (``{1:"ip:port"}``), sets as sorted arrays.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker_core.codec.fastjson import dumps_fastjson, items, loads_fastjson
from broker_core.errors import BadRequest

JAVA_LONG_MAX = (1 << 63) - 1  # EpochEntry.endOffset of the last entry (Long.MAX_VALUE)


class ControllerRequestCode(enum.IntEnum):
    """RocketMQ 5 ``RequestCode`` values of controller mode (904 and 1001-1013)."""

    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013


class ControllerResponseCode(enum.IntEnum):
    """RocketMQ 5 ``ResponseCode`` values 2000-2016 (every name has Java's ``CONTROLLER_`` prefix)."""

    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016


# --------------------------------------------------------------------------------------------------- headers

H = TypeVar("H", bound="_Header")


def java_name(attr: str) -> str:
    """``master_broker_id`` -> ``masterBrokerId`` (the Java field name)."""
    head, *rest = attr.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _required(default: Any = None) -> Any:
    """A field Java marks ``@CFNotNull``. As Java decodes (default constructor, then the fields present, then
    ``checkFields``), an absent field keeps the class's default, and decoding fails only when that is null."""
    return field(default=default, metadata={"required": True})


class _Header:
    """Base of the header dataclasses: ``extFields`` in and out."""

    __slots__ = ()

    def to_ext(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if v is None:
                continue
            out[java_name(f.name)] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out

    @classmethod
    def from_ext(cls: type[H], ext: dict[str, Any]) -> H:
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            name = java_name(f.name)
            raw = ext.get(name)
            if raw is None:
                if f.metadata.get("required") and f.default is None:
                    raise BadRequest(f"header field {name!r} is required")
                continue
            kind = hints[f.name]
            if kind in (bool, bool | None):
                kwargs[f.name] = raw if isinstance(raw, bool) else str(raw).lower() == "true"
            elif kind in (int, int | None):
                if raw == "":
                    continue
                try:
                    kwargs[f.name] = int(raw)
                except (TypeError, ValueError):
                    raise BadRequest(f"header field {name!r} must be an integer, got {raw!r}") from None
            else:
                kwargs[f.name] = str(raw)
        return cls(**kwargs)


@dataclass(slots=True)
class BrokerHeartbeatRequestHeader(_Header):
    """904 ``header/namesrv/BrokerHeartbeatRequestHeader`` (oneway, broker -> every controller)."""

    cluster_name: str = _required()
    broker_addr: str = _required()
    broker_name: str = _required()
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None


@dataclass(slots=True)
class AlterSyncStateSetRequestHeader(_Header):
    """1001 request; the body is the new set with the **current** epoch (:func:`encode_sync_state_set`)."""

    broker_name: str | None = None
    master_broker_id: int | None = None
    master_epoch: int | None = None
    invoke_time: int = 0


@dataclass(slots=True)
class AlterSyncStateSetResponseHeader(_Header):
    """1001 response; the body is the new set with epoch + 1."""

    new_sync_state_set_epoch: int = 0


@dataclass(slots=True)
class ElectMasterRequestHeader(_Header):
    """1002 request. brokerId -1 = no candidate (controller-triggered); designateElect only from admin tools."""

    cluster_name: str = _required("")
    broker_name: str = _required("")
    broker_id: int = _required(-1)
    designate_elect: bool = _required(False)
    invoke_time: int | None = None


@dataclass(slots=True)
class ElectMasterResponseHeader(_Header):
    """1002 response; the body is :func:`encode_elect_master_body`."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@dataclass(slots=True)
class RegisterBrokerToControllerRequestHeader(_Header):
    """1003 request."""

    cluster_name: str | None = None
    broker_name: str | None = None
    broker_id: int | None = None
    broker_address: str | None = None
    invoke_time: int = 0


@dataclass(slots=True)
class RegisterBrokerToControllerResponseHeader(_Header):
    """1003 response (master fields only when a master exists and is alive); the body is the SSS."""

    cluster_name: str | None = None
    broker_name: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@dataclass(slots=True)
class GetReplicaInfoRequestHeader(_Header):
    """1004 request."""

    broker_name: str | None = None


@dataclass(slots=True)
class GetReplicaInfoResponseHeader(_Header):
    """1004 response; the body is the SSS."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None


@dataclass(slots=True)
class GetMetaDataResponseHeader(_Header):
    """1005 response (no request header). ``peers`` is ``n0:127.0.0.1:9878;n1:...;`` (:func:`format_peers`)."""

    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool = False
    peers: str | None = None


@dataclass(slots=True)
class NotifyBrokerRoleChangedRequestHeader(_Header):
    """1008 request (oneway, controller leader -> each alive member); the body is the SSS."""

    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    master_broker_id: int | None = None


@dataclass(slots=True)
class CleanControllerBrokerDataRequestHeader(_Header):
    """1011 request. ``broker_controller_ids_to_clean`` is ``1;2;3`` (:func:`parse_id_list`)."""

    cluster_name: str | None = None
    broker_name: str = _required()
    broker_controller_ids_to_clean: str | None = None
    is_clean_living_broker: bool = False
    invoke_time: int = 0


@dataclass(slots=True)
class GetNextBrokerIdRequestHeader(_Header):
    """1012 request."""

    cluster_name: str | None = None
    broker_name: str | None = None


@dataclass(slots=True)
class GetNextBrokerIdResponseHeader(_Header):
    """1012 response."""

    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@dataclass(slots=True)
class ApplyBrokerIdRequestHeader(_Header):
    """1013 request. ``register_check_code`` is ``<brokerAddr>;<epochMillis>``."""

    cluster_name: str | None = None
    broker_name: str | None = None
    applied_broker_id: int | None = None
    register_check_code: str | None = None


@dataclass(slots=True)
class ApplyBrokerIdResponseHeader(_Header):
    """1013 response."""

    cluster_name: str | None = None
    broker_name: str | None = None


# Request / response header class of each code (None: the code carries no header on that side).
REQUEST_HEADERS: dict[ControllerRequestCode, type[_Header] | None] = {
    ControllerRequestCode.BROKER_HEARTBEAT: BrokerHeartbeatRequestHeader,
    ControllerRequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: AlterSyncStateSetRequestHeader,
    ControllerRequestCode.CONTROLLER_ELECT_MASTER: ElectMasterRequestHeader,
    ControllerRequestCode.CONTROLLER_REGISTER_BROKER: RegisterBrokerToControllerRequestHeader,
    ControllerRequestCode.CONTROLLER_GET_REPLICA_INFO: GetReplicaInfoRequestHeader,
    ControllerRequestCode.CONTROLLER_GET_METADATA_INFO: None,
    ControllerRequestCode.CONTROLLER_GET_SYNC_STATE_DATA: None,
    ControllerRequestCode.GET_BROKER_EPOCH_CACHE: None,
    ControllerRequestCode.NOTIFY_BROKER_ROLE_CHANGED: NotifyBrokerRoleChangedRequestHeader,
    ControllerRequestCode.UPDATE_CONTROLLER_CONFIG: None,
    ControllerRequestCode.GET_CONTROLLER_CONFIG: None,
    ControllerRequestCode.CLEAN_BROKER_DATA: CleanControllerBrokerDataRequestHeader,
    ControllerRequestCode.CONTROLLER_GET_NEXT_BROKER_ID: GetNextBrokerIdRequestHeader,
    ControllerRequestCode.CONTROLLER_APPLY_BROKER_ID: ApplyBrokerIdRequestHeader,
}
RESPONSE_HEADERS: dict[ControllerRequestCode, type[_Header] | None] = {
    ControllerRequestCode.BROKER_HEARTBEAT: None,
    ControllerRequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: AlterSyncStateSetResponseHeader,
    ControllerRequestCode.CONTROLLER_ELECT_MASTER: ElectMasterResponseHeader,
    ControllerRequestCode.CONTROLLER_REGISTER_BROKER: RegisterBrokerToControllerResponseHeader,
    ControllerRequestCode.CONTROLLER_GET_REPLICA_INFO: GetReplicaInfoResponseHeader,
    ControllerRequestCode.CONTROLLER_GET_METADATA_INFO: GetMetaDataResponseHeader,
    ControllerRequestCode.CONTROLLER_GET_SYNC_STATE_DATA: None,
    ControllerRequestCode.GET_BROKER_EPOCH_CACHE: None,
    ControllerRequestCode.NOTIFY_BROKER_ROLE_CHANGED: None,
    ControllerRequestCode.UPDATE_CONTROLLER_CONFIG: None,
    ControllerRequestCode.GET_CONTROLLER_CONFIG: None,
    ControllerRequestCode.CLEAN_BROKER_DATA: None,
    ControllerRequestCode.CONTROLLER_GET_NEXT_BROKER_ID: GetNextBrokerIdResponseHeader,
    ControllerRequestCode.CONTROLLER_APPLY_BROKER_ID: ApplyBrokerIdResponseHeader,
}


def header_fields(cls: type[_Header]) -> tuple[str, ...]:
    """The Java field names of a header class, in declaration order."""
    return tuple(java_name(f.name) for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def format_peers(peers: list[tuple[str, str]]) -> str:
    """1005's ``peers``: ``n0:127.0.0.1:9878;n1:127.0.0.1:9868;`` (each entry ends with ``;``)."""
    return "".join(f"{node_id}:{addr};" for node_id, addr in peers)


def parse_id_list(text: str | None) -> set[int]:
    """``1;2;3`` -> ``{1, 2, 3}`` (1011's brokerControllerIdsToClean); empty or None -> empty set."""
    if not text:
        return set()
    try:
        return {int(p) for p in text.split(";") if p.strip()}
    except ValueError:
        raise BadRequest(f"broker id list must be ';'-separated integers, got {text!r}") from None


# ---------------------------------------------------------------------------------------------------- bodies


def _doc(body: bytes | str, what: str) -> Any:
    try:
        return loads_fastjson(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"{what} body does not parse: {exc}") from None


def _ids(value: Any) -> frozenset[int]:
    return frozenset(int(x) for x in (value or []))


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    """``SyncStateSet`` body: ``{"syncStateSet":[1,2],"syncStateSetEpoch":3}`` (controller ids)."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


def encode_sync_state_set(ids: typing.Iterable[int], epoch: int) -> bytes:
    return dumps_fastjson({"syncStateSet": sorted(ids), "syncStateSetEpoch": int(epoch)}).encode()


def decode_sync_state_set(body: bytes | str) -> SyncStateSet:
    doc = _doc(body, "SyncStateSet")
    if not isinstance(doc, dict):
        raise BadRequest("SyncStateSet body is not an object")
    return SyncStateSet(_ids(doc.get("syncStateSet")), int(doc.get("syncStateSetEpoch") or 0))


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """``BrokerMemberGroup``: ``broker_addrs`` maps **controller** ids to addresses."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]


@dataclass(frozen=True, slots=True)
class ElectMasterBody:
    """1002 response body (``ElectMasterResponseBody``); ``broker_member_group`` only on a new election."""

    sync_state_set: frozenset[int]
    broker_member_group: BrokerMemberGroup | None = None


def encode_elect_master_body(sync_state_set: typing.Iterable[int],
                             group: BrokerMemberGroup | None = None) -> bytes:
    doc: dict[str, Any] = {}
    if group is not None:
        doc["brokerMemberGroup"] = {"brokerAddrs": dict(sorted(group.broker_addrs.items())),
                                    "brokerName": group.broker_name, "cluster": group.cluster}
    doc["syncStateSet"] = sorted(sync_state_set)
    return dumps_fastjson(doc).encode()


def decode_elect_master_body(body: bytes | str) -> ElectMasterBody:
    doc = _doc(body, "ElectMasterResponseBody")
    if not isinstance(doc, dict):
        raise BadRequest("ElectMasterResponseBody is not an object")
    group = None
    g = doc.get("brokerMemberGroup")
    if isinstance(g, dict):
        addrs = {int(k): str(v) for k, v in items(g.get("brokerAddrs") or {})}
        group = BrokerMemberGroup(str(g.get("cluster") or ""), str(g.get("brokerName") or ""), addrs)
    return ElectMasterBody(_ids(doc.get("syncStateSet")), group)


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """``BrokerReplicasInfo.ReplicaIdentity``."""

    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool


@dataclass(frozen=True, slots=True)
class ReplicasInfo:
    """``BrokerReplicasInfo.ReplicasInfo``: one broker-set in 1006's answer."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()


def _replica_doc(r: ReplicaIdentity) -> dict[str, Any]:
    return {"alive": r.alive, "brokerAddress": r.broker_address, "brokerId": r.broker_id, "brokerName": r.broker_name}


def _replica(d: Any) -> ReplicaIdentity:
    return ReplicaIdentity(str(d.get("brokerName") or ""), int(d.get("brokerId") or 0),
                           str(d.get("brokerAddress") or ""), bool(d.get("alive")))


def encode_broker_replicas_info(table: dict[str, ReplicasInfo]) -> bytes:
    """1006 response body: ``{"replicasInfoTable":{name:{...}}}``."""
    out: dict[str, Any] = {}
    for name, info in table.items():
        doc: dict[str, Any] = {"inSyncReplicas": [_replica_doc(r) for r in info.in_sync_replicas]}
        if info.master_address is not None:
            doc["masterAddress"] = info.master_address
        if info.master_broker_id is not None:
            doc["masterBrokerId"] = info.master_broker_id
        doc["masterEpoch"] = info.master_epoch
        doc["notInSyncReplicas"] = [_replica_doc(r) for r in info.not_in_sync_replicas]
        doc["syncStateSetEpoch"] = info.sync_state_set_epoch
        out[name] = doc
    return dumps_fastjson({"replicasInfoTable": out}).encode()


def decode_broker_replicas_info(body: bytes | str) -> dict[str, ReplicasInfo]:
    doc = _doc(body, "BrokerReplicasInfo")
    table = doc.get("replicasInfoTable") if isinstance(doc, dict) else None
    out: dict[str, ReplicasInfo] = {}
    for name, d in items(table or {}):
        mid = d.get("masterBrokerId")
        out[str(name)] = ReplicasInfo(
            None if mid is None else int(mid), d.get("masterAddress"), int(d.get("masterEpoch") or 0),
            int(d.get("syncStateSetEpoch") or 0), tuple(_replica(r) for r in d.get("inSyncReplicas") or []),
            tuple(_replica(r) for r in d.get("notInSyncReplicas") or []))
    return out


def encode_broker_names(names: typing.Iterable[str]) -> bytes:
    """1006 request body: a JSON array of brokerNames."""
    return json.dumps(list(names), separators=(",", ":"), ensure_ascii=False).encode()


def decode_broker_names(body: bytes | str) -> list[str]:
    if not body:
        return []
    doc = _doc(body, "broker name list")
    if not isinstance(doc, list):
        raise BadRequest("the broker name list is not a JSON array")
    return [str(x) for x in doc]


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """``EpochEntry``; ``end_offset`` is the next entry's start, or Long.MAX_VALUE for the last."""

    epoch: int
    start_offset: int
    end_offset: int = JAVA_LONG_MAX


@dataclass(frozen=True, slots=True)
class EpochEntryCache:
    """1007 response body. ``broker_id`` is the namesrv id (0 on the master)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    epoch_list: tuple[EpochEntry, ...]
    max_offset: int


def encode_epoch_entry_cache(cache: EpochEntryCache) -> bytes:
    return dumps_fastjson({
        "brokerId": cache.broker_id, "brokerName": cache.broker_name, "clusterName": cache.cluster_name,
        "epochList": [{"endOffset": e.end_offset, "epoch": e.epoch, "startOffset": e.start_offset}
                      for e in cache.epoch_list],
        "maxOffset": cache.max_offset}).encode()


def decode_epoch_entry_cache(body: bytes | str) -> EpochEntryCache:
    doc = _doc(body, "EpochEntryCache")
    if not isinstance(doc, dict):
        raise BadRequest("EpochEntryCache body is not an object")
    entries = tuple(EpochEntry(int(e.get("epoch") or 0), int(e.get("startOffset") or 0),
                               int(e["endOffset"]) if e.get("endOffset") is not None else JAVA_LONG_MAX)
                    for e in doc.get("epochList") or [])
    return EpochEntryCache(str(doc.get("clusterName") or ""), str(doc.get("brokerName") or ""),
                           int(doc.get("brokerId") or 0), entries, int(doc.get("maxOffset") or 0))


def encode_properties(props: dict[str, Any]) -> bytes:
    """1010 response / 1009 request body: ``key=value`` lines (what ``MixAll.properties2String`` writes; the
    parser is :func:`broker_core.codec.properties_file.parse_properties`)."""
    return "".join(f"{k}={'true' if v is True else 'false' if v is False else v}\n"
                   for k, v in props.items()).encode()
