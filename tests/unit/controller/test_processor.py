"""The controller's request handlers without a network: a node that is not the serving leader (no Raft started)
answers 904, 1005, 1009 and 1010 itself and 2007 to the queued codes; 904 without brokerId is 2005; 1009 refuses
blacklisted keys (NO_PERMISSION) and applies the others."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from broker_core.codec.properties_file import parse_properties
from broker_core.controller.config import ControllerConfig
from broker_core.controller.manager import ControllerManager
from broker_core.controller.processor import controller_handlers
from broker_core.protocol import RemotingCommand
from broker_core.protocol.controller import (
    BrokerHeartbeatRequestHeader,
    ControllerRequestCode,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    encode_broker_names,
    encode_properties,
)

R = ControllerRequestCode


def _manager() -> ControllerManager:
    return ControllerManager(ControllerConfig.from_properties({
        "controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9868",
        "controllerDLegerSelfId": "n0"}))


def _call(handlers: dict[int, Any], code: int, header: dict[str, str] | None = None, body: bytes = b"",
          conn: Any = None) -> RemotingCommand:
    out = handlers[code](RemotingCommand.request(code, header or {}, body), conn)
    if inspect.isawaitable(out):
        out = asyncio.run(out)  # type: ignore[arg-type]  # a handler's awaitable is a coroutine here
    assert isinstance(out, RemotingCommand)
    return out


def test_any_node_answers_heartbeats_metadata_and_config() -> None:
    m = _manager()
    h = controller_handlers(m)
    assert set(h) == set(ControllerRequestCode) - {R.GET_BROKER_EPOCH_CACHE, R.NOTIFY_BROKER_ROLE_CHANGED}
    conn = object()
    no_id = _call(h, R.BROKER_HEARTBEAT, {"clusterName": "c", "brokerAddr": "a:1", "brokerName": "b"}, conn=conn)
    assert no_id.code == ControllerResponseCode.CONTROLLER_INVALID_REQUEST
    ok = _call(h, R.BROKER_HEARTBEAT, BrokerHeartbeatRequestHeader("c", "a:1", "b", 2, 3, 100).to_ext(), conn=conn)
    assert ok.code == 0 and m.is_alive("c", "b", 2) and m.heartbeats.live_info("c", "b", 2).epoch == 3
    m.on_channel_close(conn)
    assert not m.is_alive("c", "b", 2)

    meta = _call(h, R.CONTROLLER_GET_METADATA_INFO)
    assert meta.code == 0
    assert meta.header == {"group": "g", "isLeader": "false", "peers": "n0:127.0.0.1:9878;n1:127.0.0.1:9868;"}

    refused = _call(h, R.UPDATE_CONTROLLER_CONFIG, body=encode_properties({"configStorePath": "/x"}))
    assert refused.code == 16
    assert _call(h, R.UPDATE_CONTROLLER_CONFIG, body=encode_properties({"enableElectUncleanMaster": True})).code == 0
    assert m.config.enable_elect_unclean_master and m.state.enable_elect_unclean_master
    props = parse_properties(_call(h, R.GET_CONTROLLER_CONFIG).body.decode())
    assert props["enableElectUncleanMaster"] == "true" and props["controllerDLegerSelfId"] == "n0"


def test_queued_codes_answer_not_leader_off_the_serving_leader() -> None:
    h = controller_handlers(_manager())
    for code, header, body in [
        (R.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader("c", "b").to_ext(), b""),
        (R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader("c", "b", 1).to_ext(), b""),
        (R.CONTROLLER_GET_SYNC_STATE_DATA, {}, encode_broker_names(["b"])),
        (R.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "b"}, b""),
    ]:
        assert _call(h, code, header, body).code == ControllerResponseCode.CONTROLLER_NOT_LEADER, code
    assert _call(h, R.CONTROLLER_GET_SYNC_STATE_DATA).code == 1  # no names: RocketMQ's unset response
