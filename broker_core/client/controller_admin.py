"""ControllerAdmin: the admin side of RocketMQ 5 controller mode (what ``mqadmin getControllerMetaData``,
``getSyncStateSet``, ``electMaster``, ``cleanBrokerMetadata``, ``get/updateControllerConfig`` and
``getBrokerEpoch`` send; reference §2, §6).

Blocking calls over :class:`BlockingClient` (each thread its own sockets), safe to share between threads. The
controller addresses are ``host:port;host:port`` (the controllers' peer ports, or name servers with the
embedded controller); :meth:`leader` asks each in turn (1005) for the leader, and calls that need the leader go
there. A leader that has just changed answers 2007: the call asks for the leader again, once.
Refusals raise :class:`ClientError` with the response code (``ControllerResponseCode`` values for 2000-2016).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.errors import ClientError
from broker_core.protocol import RemotingCommand
from broker_core.protocol.codes import ResponseCode
from broker_core.protocol.controller import (
    CleanControllerBrokerDataRequestHeader,
    ControllerRequestCode,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    EpochEntryCache,
    GetMetaDataResponseHeader,
    ReplicasInfo,
    decode_broker_replicas_info,
    decode_elect_master_body,
    decode_epoch_entry_cache,
    encode_broker_names,
    encode_properties,
)
from broker_core.remoting.blocking import BlockingClient

R = ControllerRequestCode


@dataclass(frozen=True)
class ControllerMetadata:
    """1005's answer from one controller."""

    group: str | None
    leader_id: str | None
    leader_address: str | None
    is_leader: bool
    peers: list[tuple[str, str]]  # (id, address)


@dataclass(frozen=True)
class ElectResult:
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    sync_state_set: frozenset[int]


def _peers(text: str | None) -> list[tuple[str, str]]:
    out = []
    for part in (text or "").split(";"):
        node_id, sep, addr = part.partition(":")
        if sep and addr:
            out.append((node_id, addr))
    return out


def _properties(body: bytes) -> dict[str, str]:
    out = {}
    for line in body.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


class ControllerAdmin:
    def __init__(self, controller_addrs: str, *, timeout: float = 5.0, client: BlockingClient | None = None) -> None:
        self.addrs = [a.strip() for a in controller_addrs.split(";") if a.strip()]
        if not self.addrs:
            raise ValueError("no controller address given")
        self.timeout = timeout
        self.client = client or BlockingClient(connect_timeout=min(3.0, timeout))
        self._leader: str | None = None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ControllerAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _invoke(self, addr: str, code: int, header: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        return self.client.invoke(addr, RemotingCommand.request(code, header or {}, body), self.timeout)

    # -- metadata ------------------------------------------------------------------------------------------

    def metadata(self, addr: str | None = None) -> ControllerMetadata:
        """1005 to ``addr`` (default: the first controller that answers)."""
        errors = []
        for a in [addr] if addr else self.addrs:
            try:
                resp = self._invoke(a, R.CONTROLLER_GET_METADATA_INFO)
            except (OSError, TimeoutError) as exc:
                errors.append(f"{a}: {exc}")
                continue
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(resp.code, resp.remark or "CONTROLLER_GET_METADATA_INFO failed")
            h = GetMetaDataResponseHeader.from_ext(resp.header)
            return ControllerMetadata(h.group, h.controller_leader_id, h.controller_leader_address, h.is_leader,
                                      _peers(h.peers))
        raise ConnectionError("no controller answered: " + "; ".join(errors))

    def leader(self, refresh: bool = False) -> str:
        """The leader's address, from the first controller that knows it."""
        if self._leader and not refresh:
            return self._leader
        errors = []
        for a in self.addrs:
            try:
                meta = self.metadata(a)
            except (OSError, TimeoutError, ClientError) as exc:
                errors.append(f"{a}: {exc}")
                continue
            if meta.leader_address:
                self._leader = meta.leader_address
                return meta.leader_address
            errors.append(f"{a}: no leader known")
        raise ConnectionError("no controller leader: " + "; ".join(errors))

    def _leader_call(self, code: int, header: dict[str, str] | None = None, body: bytes = b"",
                     ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        for attempt in (0, 1):
            try:
                resp = self._invoke(self.leader(refresh=attempt > 0), code, header, body)
            except (OSError, TimeoutError):
                if attempt:
                    raise
                continue
            if resp.code == ControllerResponseCode.CONTROLLER_NOT_LEADER and not attempt:
                continue
            if resp.code not in ok:
                raise ClientError(resp.code, resp.remark or f"controller request {code} failed")
            return resp
        raise AssertionError("unreachable")

    # -- reads ---------------------------------------------------------------------------------------------

    def sync_state_data(self, broker_names: list[str]) -> dict[str, ReplicasInfo]:
        """1006: master, epochs and in-sync / not-in-sync replicas of each named broker-set the controller
        knows (unknown names are absent)."""
        if not broker_names:
            return {}
        return decode_broker_replicas_info(
            self._leader_call(R.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names(broker_names)).body)

    def controller_config(self, addr: str) -> dict[str, str]:
        """1010 to one controller."""
        resp = self._invoke(addr, R.GET_CONTROLLER_CONFIG)
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark or "GET_CONTROLLER_CONFIG failed")
        return _properties(resp.body)

    def broker_epoch_cache(self, broker_addr: str) -> EpochEntryCache:
        """1007 to a broker (controller mode only): its epoch entries and max offset."""
        resp = self._invoke(broker_addr, R.GET_BROKER_EPOCH_CACHE)
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark or "GET_BROKER_EPOCH_CACHE failed")
        return decode_epoch_entry_cache(resp.body)

    # -- writes --------------------------------------------------------------------------------------------

    def elect_master(self, cluster: str, broker_name: str, broker_id: int) -> ElectResult:
        """1002 with designateElect=true: make ``broker_id`` (a controller id) the master of ``broker_name``.
        The controller refuses (2012) an id that is not alive in the SyncStateSet; the current master gives 2011."""
        header = ElectMasterRequestHeader(cluster, broker_name, broker_id, True)
        resp = self._leader_call(R.CONTROLLER_ELECT_MASTER, header.to_ext())
        h = ElectMasterResponseHeader.from_ext(resp.header)
        body = decode_elect_master_body(resp.body) if resp.body else None
        return ElectResult(h.master_broker_id, h.master_address, h.master_epoch, h.sync_state_set_epoch,
                           body.sync_state_set if body else frozenset())

    def clean_broker_data(self, broker_name: str, broker_ids: list[int] | None = None, *, cluster: str | None = None,
                          clean_living_broker: bool = False) -> None:
        """1011: forget ``broker_ids`` of ``broker_name`` (all of the set when None)."""
        ids = ";".join(str(i) for i in broker_ids) if broker_ids else None
        header = CleanControllerBrokerDataRequestHeader(cluster, broker_name, ids, clean_living_broker)
        self._leader_call(R.CLEAN_BROKER_DATA, header.to_ext())

    def update_controller_config(self, props: dict[str, str], addrs: list[str] | None = None) -> None:
        """1009 to each controller (``addrs``, default all): blacklisted keys get NO_PERMISSION."""
        for a in addrs or self.addrs:
            resp = self._invoke(a, R.UPDATE_CONTROLLER_CONFIG, body=encode_properties(props))
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(resp.code, resp.remark or "UPDATE_CONTROLLER_CONFIG failed")
