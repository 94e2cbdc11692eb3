"""Short polling: with ``longPollingEnable=false`` a pull that asks to be held (suspend 15 s) is answered after
``shortPollingTimeMills``; with long polling it is held past the client's 5 s timeout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.headers import PULL_SUBSCRIPTION, PULL_SUSPEND
from broker_core.remoting.client import RemotingClient, RemotingTimeout, run_sync
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("polling"))
    try:
        c.add_broker("short", "longPollingEnable=false\nshortPollingTimeMills=200\n")
        c.add_broker("long", "")
        yield c
    finally:
        c.close()


def held_pull(addr: str, timeout: float) -> RemotingCommand:
    async def go() -> RemotingCommand:
        client = RemotingClient(serialize_type=SERIALIZE_JSON)
        try:
            create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Idle", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
            assert (await client.invoke(addr, create, 5)).code == ResponseCode.SUCCESS
            pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
                "consumerGroup": "idle-g", "topic": "Idle", "queueId": 0, "queueOffset": 0, "maxMsgNums": 1,
                "sysFlag": PULL_SUBSCRIPTION | PULL_SUSPEND, "commitOffset": 0, "suspendTimeoutMillis": 15000,
                "subscription": "*", "subVersion": 0, "expressionType": "TAG"})
            return await client.invoke(addr, pull, timeout)
        finally:
            await client.close()
    return run_sync(go())


def test_short_polling_answers_a_held_pull_early(cluster: Cluster) -> None:
    resp = held_pull(cluster.brokers["short"].addr, 5.0)
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    # long polling holds the same pull for 15 s; the error names the request code, the broker and the timeout
    with pytest.raises(RemotingTimeout, match=rf"request {int(RequestCode.PULL_MESSAGE)} to .+ timed out after 1\.0s"):
        held_pull(cluster.brokers["long"].addr, 1.0)
