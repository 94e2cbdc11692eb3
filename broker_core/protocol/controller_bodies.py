"""The fastjson bodies of RocketMQ 5 controller mode (reference ``rocketmq-controller.md`` §2), written as
fastjson writes a JavaBean: fields sorted by name, nulls left out, ``Map<Long,...>`` keys bare
(``{1:"ip:port"}``), sets as sorted arrays. Sans-I/O. Re-exported by :mod:`broker_core.protocol.controller`, where
callers import them from.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any

from broker_core.codec.fastjson import dumps_fastjson, items, loads_fastjson
from broker_core.errors import BadRequest

JAVA_LONG_MAX = (1 << 63) - 1  # EpochEntry.endOffset of the last entry (Long.MAX_VALUE)


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
