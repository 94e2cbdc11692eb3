"""The controller's request handlers (RocketMQ's ``ControllerRequestProcessor``), for any RemotingServer.

:func:`controller_handlers` returns ``{code: handler}`` for 904 and 1001-1013 (1007 and 1008 are the broker's
and are not among them). Any node answers 904 (its own heartbeat table), 1005 and the config codes 1009/1010;
the others go through :meth:`ControllerManager.run` and get 2007 NOT_LEADER off the serving leader. A header
that does not decode gets SYSTEM_ERROR naming the field (the server's BadRequest path), as RocketMQ answers a
header it cannot decode.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker_core.codec.properties_file import parse_properties
from broker_core.controller.manager import ControllerManager
from broker_core.controller.replicas import ControllerResult
from broker_core.protocol import RemotingCommand
from broker_core.protocol.codes import ResponseCode
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ControllerRequestCode,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    decode_broker_names,
    decode_sync_state_set,
    encode_properties,
    format_peers,
)
from broker_core.protocol.controller import ControllerResponseCode as C
from broker_core.remoting.server import Connection, Handler

R = ControllerRequestCode


def _response(cmd: RemotingCommand, result: ControllerResult) -> RemotingCommand:
    header = result.header.to_ext() if result.header is not None else {}
    return cmd.response(result.code, result.remark or None, header, result.body or b"")


def controller_handlers(manager: ControllerManager) -> dict[int, Handler]:
    m = manager

    def queued(check: Callable[[RemotingCommand], Callable[[], ControllerResult]], write: bool = True
               ) -> Handler:
        def handle(cmd: RemotingCommand, conn: Connection) -> Awaitable[RemotingCommand]:
            fn = check(cmd)  # decode first: a bad header answers SYSTEM_ERROR at once

            async def run() -> RemotingCommand:
                return _response(cmd, await m.run(fn, write))
            return run()
        return handle

    def heartbeat(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = BrokerHeartbeatRequestHeader.from_ext(cmd.header)
        if h.broker_id is None:
            return cmd.response(C.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        m.heartbeats.on_heartbeat(h.cluster_name, h.broker_name, h.broker_addr, h.broker_id,
                                  h.heartbeat_timeout_mills, conn, h.epoch, h.max_offset, h.confirm_offset,
                                  h.election_priority)
        return cmd.response(ResponseCode.SUCCESS, "Heart beat success")

    def metadata(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        leader_id, leader_addr = m.leader()
        is_leader = m.raft is not None and m.raft.is_leader()
        header = GetMetaDataResponseHeader(m.config.controller_dleger_group or None, leader_id, leader_addr,
                                           is_leader, format_peers(m.config.peers()))
        return cmd.response(ResponseCode.SUCCESS, None, header.to_ext())

    def alter_sss(cmd: RemotingCommand) -> Callable[[], ControllerResult]:
        h = AlterSyncStateSetRequestHeader.from_ext(cmd.header)
        sss = decode_sync_state_set(cmd.body or b"{}")
        return lambda: m.state.alter_sync_state_set(h, sss, m.is_alive)

    def elect(cmd: RemotingCommand, conn: Connection) -> Awaitable[RemotingCommand]:
        h = ElectMasterRequestHeader.from_ext(cmd.header)

        async def run() -> RemotingCommand:
            trigger = "admin" if h.designate_elect else "broker" if h.broker_id not in (None, -1) else "controller"
            return _response(cmd, await m.elect(h, trigger))
        return run()

    def register(cmd: RemotingCommand) -> Callable[[], ControllerResult]:
        h = RegisterBrokerToControllerRequestHeader.from_ext(cmd.header)
        return lambda: m.state.register_broker(h, m.is_alive)

    def replica_info(cmd: RemotingCommand) -> Callable[[], ControllerResult]:
        h = GetReplicaInfoRequestHeader.from_ext(cmd.header)
        return lambda: m.state.get_replica_info(h)

    def sync_state_data(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        names = decode_broker_names(cmd.body or b"")
        if not names:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "not set any response code")

        async def run() -> RemotingCommand:
            return _response(cmd, await m.run(lambda: m.state.get_sync_state_data(names, m.is_alive), False))
        return run()

    def clean(cmd: RemotingCommand) -> Callable[[], ControllerResult]:
        h = CleanControllerBrokerDataRequestHeader.from_ext(cmd.header)
        return lambda: m.state.clean_broker_data(h, m.is_alive)

    def next_id(cmd: RemotingCommand) -> Callable[[], ControllerResult]:
        h = GetNextBrokerIdRequestHeader.from_ext(cmd.header)
        return lambda: m.state.get_next_broker_id(h)

    def apply_id(cmd: RemotingCommand) -> Callable[[], ControllerResult]:
        h = ApplyBrokerIdRequestHeader.from_ext(cmd.header)
        return lambda: m.state.apply_broker_id(h)

    def update_config(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if not cmd.body:
            return cmd.response(ResponseCode.SUCCESS, None)
        try:
            props = parse_properties(cmd.body.decode("utf-8"), "UPDATE_CONTROLLER_CONFIG")
        except UnicodeDecodeError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}")
        if m.config.black_list() & set(props):
            return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            m.config.update(props)
        except ValueError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        m.state.enable_elect_unclean_master = m.config.enable_elect_unclean_master
        return cmd.response(ResponseCode.SUCCESS, None)

    def get_config(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, body=encode_properties(m.config.as_properties()))

    return {
        R.BROKER_HEARTBEAT: heartbeat,
        R.CONTROLLER_ALTER_SYNC_STATE_SET: queued(alter_sss),
        R.CONTROLLER_ELECT_MASTER: elect,
        R.CONTROLLER_REGISTER_BROKER: queued(register),
        R.CONTROLLER_GET_REPLICA_INFO: queued(replica_info, write=False),
        R.CONTROLLER_GET_METADATA_INFO: metadata,
        R.CONTROLLER_GET_SYNC_STATE_DATA: sync_state_data,
        R.UPDATE_CONTROLLER_CONFIG: update_config,
        R.GET_CONTROLLER_CONFIG: get_config,
        R.CLEAN_BROKER_DATA: queued(clean),
        R.CONTROLLER_GET_NEXT_BROKER_ID: queued(next_id, write=False),
        R.CONTROLLER_APPLY_BROKER_ID: queued(apply_id),
    }
