"""Broker-to-client calls over the client's own connection, real name server and broker processes, our SDK on both
ends: 307 GET_CONSUMER_RUNNING_INFO, 309 CONSUME_MESSAGE_DIRECTLY, 223/221 consumer status, through the broker's
forwarding (RocketMQ's ``Broker2Client``/``callConsumer``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, ClientError, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.client_calls import ConsumeMessageDirectlyResult
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("b2c"))
    try:
        c.add_brokers_registered({"broker-a": "autoCreateTopicEnable=true\n"})
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as a:
        yield a


class Listener:
    """Answers as told per body: b"later" -> RECONSUME_LATER, b"boom" -> raises, b"null" -> None."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus | None:
        with self.lock:
            self.seen += [m.body for m in msgs]
        body = msgs[0].body
        if body.startswith(b"later"):
            return ConsumeStatus.RECONSUME_LATER
        if body.startswith(b"boom"):
            raise RuntimeError("listener exploded")
        if body.startswith(b"null"):
            return None
        return ConsumeStatus.CONSUME_SUCCESS


@pytest.fixture(scope="module")
def consumer(cluster: Cluster, admin: AdminClient) -> Iterator[tuple[PushConsumer, Listener]]:
    admin.create_topic("B2C", 2, 2)
    listener = Listener()
    c = PushConsumer("b2c-group", cluster.namesrv, consume_from="FIRST", consume_thread_max=4)
    c.subscribe("B2C", "TagA || TagB")
    c.register_message_listener(listener)
    c.start()
    with Producer("b2c-producer", cluster.namesrv) as p:
        for i in range(6):
            p.send(Message("B2C", f"ok-{i}".encode(), tags="TagA"))
    wait_until(lambda: len(listener.seen) >= 6, 60, "the first messages consumed")
    yield c, listener
    c.shutdown()


def test_running_info_reports_subscriptions_queues_and_rates(admin: AdminClient,
                                                             consumer: tuple[PushConsumer, Listener]) -> None:
    c, _ = consumer
    info = admin.client_running_info("b2c-group", c.instance.client_id)
    props = info.properties
    assert props["consumerGroup"] == "b2c-group"
    assert props["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert props["PROP_CONSUMEORDERLY"] == "false"
    assert props["PROP_THREADPOOL_CORE_SIZE"] == "4"
    assert props["PROP_NAMESERVER_ADDR"] == c.instance.namesrv_addrs[0] + ";"
    assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0
    subs = {s["topic"]: s for s in info.subscriptions}
    assert subs["B2C"]["subString"] == "TagA || TagB" and subs["B2C"]["tagsSet"] == ["TagA", "TagB"]
    assert "%RETRY%b2c-group" in subs
    queues = {mq: q for mq, q in info.mq_table.items() if mq[0] == "B2C"}
    assert sorted(q for _, _, q in queues) == [0, 1]
    assert sum(q["commitOffset"] for q in queues.values()) == 6
    assert all(q["cachedMsgCount"] == 0 and not q["droped"] and q["lastPullTimestamp"] > 0 for q in queues.values())
    assert max(q["lastConsumeTimestamp"] for q in queues.values()) > 0
    status = info.status_table["B2C"]
    assert status["consumeOKTPS"] > 0 and status["pullTPS"] > 0 and status["consumeFailedMsgs"] == 0


def test_running_info_with_jstack(admin: AdminClient, consumer: tuple[PushConsumer, Listener]) -> None:
    c, _ = consumer
    info = admin.client_running_info("b2c-group", c.instance.client_id, jstack=True)
    assert info.jstack is not None and "Thread: broker-core-client-loop" in info.jstack


def test_unknown_client_is_not_online(admin: AdminClient, consumer: tuple[PushConsumer, Listener]) -> None:
    with pytest.raises(ClientError) as err:
        admin.client_running_info("b2c-group", "10.0.0.1@1@nobody")
    assert err.value.code == ResponseCode.SYSTEM_ERROR
    assert "The Consumer <b2c-group> <10.0.0.1@1@nobody> not online" in str(err.value)


def _send(cluster: Cluster, body: bytes) -> str:
    with Producer("b2c-direct-producer", cluster.namesrv) as p:
        return p.send(Message("B2C", body, tags="TagC")).offset_msg_id  # TagC: the consumer never pulls it


@pytest.mark.parametrize(("body", "expected", "remark"), [
    (b"direct-ok", "CR_SUCCESS", None), (b"later-please", "CR_LATER", None), (b"null-answer", "CR_RETURN_NULL", None),
    (b"boom-now", "CR_THROW_EXCEPTION", "RuntimeError: listener exploded")])
def test_consume_directly_answers_the_listener_result(cluster: Cluster, admin: AdminClient,
                                                      consumer: tuple[PushConsumer, Listener], body: bytes,
                                                      expected: str, remark: str | None) -> None:
    c, listener = consumer
    offset_id = _send(cluster, body)
    before = c.stats.consume_status("B2C")["consumeFailedMsgs"]
    result = admin.consume_message_directly("b2c-group", c.instance.client_id, offset_id, "B2C")
    assert result.consume_result == expected
    assert result.order is False and result.auto_commit is True and result.spent_time_ms >= 0
    if remark is None:
        assert result.remark is None
    else:
        assert result.remark is not None and result.remark.startswith(remark)
    assert body in listener.seen
    # nothing is sent back or counted: direct consumption changes no state
    assert c.stats.consume_status("B2C")["consumeFailedMsgs"] == before


def test_consume_directly_for_a_group_the_client_does_not_have(cluster: Cluster, admin: AdminClient,
                                                               consumer: tuple[PushConsumer, Listener]) -> None:
    c, _ = consumer
    offset_id = _send(cluster, b"direct-ok-2")
    broker = cluster.brokers["broker-a"].addr
    resp = admin.instance.remoting.invoke_sync(broker, RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {
        "consumerGroup": "other-group", "clientId": c.instance.client_id, "msgId": offset_id}))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == f"The Consumer <other-group> <{c.instance.client_id}> not online"


def test_consumer_status_through_the_broker(admin: AdminClient, consumer: tuple[PushConsumer, Listener]) -> None:
    c, _ = consumer
    table = admin.client_consumer_status("B2C", "b2c-group")
    mine = table[c.instance.client_id]
    assert sorted(q for t, _, q in mine if t == "B2C") == [0, 1]
    held = {(mq.topic, mq.broker_name, mq.queue_id): pq.committable() for mq, pq in c.process_queues.items()
            if mq.topic == "B2C"}
    assert mine == held and sum(mine.values()) >= 6
    assert admin.client_consumer_status("B2C", "b2c-group", "someone-else") == {}


def test_direct_result_body_is_fastjson() -> None:
    r = ConsumeMessageDirectlyResult(consume_result="CR_LATER", spent_time_ms=7)
    assert r.encode() == b'{"autoCommit":true,"consumeResult":"CR_LATER","order":false,"spentTimeMills":7}'
