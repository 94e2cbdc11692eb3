"""RocketMQ 5 controller mode on the wire (reference ``rocketmq-controller.md`` §2): request and response codes,
the header of each code, and the fastjson bodies. Sans-I/O; the codec is :mod:`broker_core.codec.fastjson`.

Codes live in their own enums: :class:`RequestCode` holds the broker's codes and :class:`ControllerRequestCode`
the controller's (904 and 1001-1013); a server answering controller requests reads the code with the latter.

Headers are dataclasses whose attributes are the Java fields in snake_case; :meth:`_Header.to_ext` writes the
``extFields`` (camelCase, the Java field names, ``None`` left out, ints and booleans as text) and
:meth:`_Header.from_ext` reads them back (absent -> the default; a required field absent or a number that does not
parse -> :class:`BadRequest`). Java's boxed types map to ``X | None``; primitives to ``X`` with Java's default.

The bodies (SyncStateSet, ElectMasterResponseBody, BrokerReplicasInfo, EpochEntryCache, ...) live in
:mod:`broker_core.protocol.controller_bodies` and are importable from here.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker_core.errors import BadRequest
from broker_core.protocol.controller_bodies import (  # noqa: F401 - re-exported: callers import the bodies here
    JAVA_LONG_MAX,
    BrokerMemberGroup,
    ElectMasterBody,
    EpochEntry,
    EpochEntryCache,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    decode_broker_names,
    decode_broker_replicas_info,
    decode_elect_master_body,
    decode_epoch_entry_cache,
    decode_sync_state_set,
    encode_broker_names,
    encode_broker_replicas_info,
    encode_elect_master_body,
    encode_epoch_entry_cache,
    encode_properties,
    encode_sync_state_set,
)


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
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            v = getattr(self, f.name)
            if v is None:
                continue
            out[java_name(f.name)] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out

    @classmethod
    def from_ext(cls: type[H], ext: dict[str, Any]) -> H:
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # every subclass is a dataclass
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
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # every subclass is a dataclass
    return tuple(java_name(f.name) for f in fields)


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
