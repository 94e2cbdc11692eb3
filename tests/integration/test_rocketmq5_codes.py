"""RocketMQ 5's request codes 901-908 (GET_BROKER_MEMBER_GROUP .. RESET_MASTER_FLUSH_OFFSET: broker container and HA
admin) against a real broker: it serves none of them, so each gets REQUEST_CODE_NOT_SUPPORTED with RocketMQ's
remark, in both serialize types. These numbers were broker_core's own admin codes before they moved to
``OWN_CODE_BLOCK`` (30900-30911): a RocketMQ 5 admin tool asking for the HA status (907) ran the dead-letter
resend, and 901 the disk check. The moved codes still answer, also in the ROCKETMQ serialize type, whose header
holds the code in two bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from broker_core.codec.wire import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

# RocketMQ 5 RequestCode.java: GET_BROKER_MEMBER_GROUP=901, ADD_BROKER=902, REMOVE_BROKER=903, BROKER_HEARTBEAT=904,
# NOTIFY_MIN_BROKER_ID_CHANGE=905, EXCHANGE_BROKER_HA_INFO=906, GET_BROKER_HA_STATUS=907, RESET_MASTER_FLUSH_OFFSET=908
ROCKETMQ5_BROKER_CODES = range(901, 909)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    c = Cluster(tmp_path_factory.mktemp("rocketmq5-codes"))
    try:
        c.add_brokers_registered({"broker-a": ""})
        yield c.brokers["broker-a"].addr
    finally:
        c.close()


@pytest.fixture(params=[SERIALIZE_JSON, SERIALIZE_ROCKETMQ], ids=["json", "rocketmq"])
def client(request: pytest.FixtureRequest) -> Iterator[BlockingClient]:
    c = BlockingClient(serialize_type=request.param)
    yield c
    c.close()


def test_ha_status_and_member_group_are_not_supported(client: BlockingClient, broker: str) -> None:
    """What mqadmin's haStatus (907) and a container's member-group lookup (901) get: code 3, RocketMQ's remark."""
    for code in (907, 901):
        # headers as RocketMQ 5's tools send them (907 has none; 901 GetBrokerMemberGroupRequestHeader)
        header = {"clusterName": "DefaultCluster", "brokerName": "broker-a"} if code == 901 else {}
        resp = client.invoke(broker, RemotingCommand.request(code, header), 10.0)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
        assert resp.remark == f" request type {code} not supported"
        assert resp.body in (b"", None)


def test_every_rocketmq5_code_of_the_old_block_is_not_supported(client: BlockingClient, broker: str) -> None:
    for code in ROCKETMQ5_BROKER_CODES:
        resp = client.invoke(broker, RemotingCommand.request(code, {}), 10.0)
        assert (resp.code, resp.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                            f" request type {code} not supported")


def test_own_codes_answer_at_their_new_numbers(client: BlockingClient, broker: str) -> None:
    disk = client.invoke(broker, RemotingCommand.request(RequestCode.CHECK_DISK), 10.0)
    assert disk.code == ResponseCode.SUCCESS and 0 <= json.loads(disk.body)["ratio"] <= 1
    backlog = client.invoke(broker, RemotingCommand.request(RequestCode.GET_DELAY_BACKLOG), 10.0)
    assert backlog.code == ResponseCode.SUCCESS and isinstance(json.loads(backlog.body), dict)
