"""SQL92 filtering on real brokers: the broker with ``enablePropertyFilter=true`` sends only matching messages
(checked on the raw pull response), the SDK's push consumer receives exactly the matching set, a bad expression
is refused with SUBSCRIPTION_PARSE_FAILED, and a broker without the switch refuses SQL92 as RocketMQ does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, ClientError, Message, MessageExt, Producer, PullConsumer, PushConsumer
from broker_core.client.consumer.base import decode_records
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.filter import parse_subscription
from broker_core.protocol.headers import PULL_SUBSCRIPTION
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

EXPR = "a BETWEEN 3 AND 7 AND (TAGS = 'red' OR color IS NULL)"


def expected(i: int) -> bool:
    """EXPR by hand for message ``i`` (properties below)."""
    return 3 <= i <= 7 and (i % 3 == 0 or i % 4 == 0)


def message(topic: str, i: int) -> Message:
    tags = "red" if i % 3 == 0 else "blue"
    props = {"a": str(i)} if i != 5 else {"a": "five"}  # a type mismatch never matches
    if i % 4 != 0:
        props["color"] = tags
    return Message(topic, f"m{i}".encode(), tags=tags, properties=props)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sql92"))
    try:
        c.add_brokers_registered({"sql-on": "enablePropertyFilter=true\n", "sql-off": ""})
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def topics(cluster: Cluster, admin: AdminClient, producer: Producer) -> dict[str, list[int]]:
    """``SqlOn`` on the filtering broker and ``SqlOff`` on the other, one queue each, 12 messages each."""
    admin.create_topic("SqlOn", 1, 1, brokers=["sql-on"])
    admin.create_topic("SqlOff", 1, 1, brokers=["sql-off"])
    for topic in ("SqlOn", "SqlOff"):
        for i in range(12):
            producer.send(message(topic, i))
    return {"SqlOn": [i for i in range(12) if expected(i)]}


def raw_pull(pc: PullConsumer, broker: str, topic: str, expression: str, kind: str, offset: int = 0
             ) -> RemotingCommand:
    async def go() -> RemotingCommand:
        await pc.instance.route(topic)
        header = {"consumerGroup": pc.group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 32,
                  "sysFlag": PULL_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": 0,
                  "subscription": expression, "subVersion": 0, "expressionType": kind}
        return await pc.instance.invoke(pc.instance.broker_addr(broker),
                                        RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
    from broker_core.remoting.client import run_sync
    return run_sync(go())


def test_the_broker_sends_only_matching_messages(cluster: Cluster, topics: dict[str, list[int]]) -> None:
    pc = PullConsumer("sql-raw", cluster.namesrv).start()
    try:
        resp = raw_pull(pc, "sql-on", "SqlOn", EXPR, "SQL92")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        on_wire = decode_records(resp.body, "sql-on")  # what crossed the wire, before any client re-check
        assert [m.body for m in on_wire] == [f"m{i}".encode() for i in topics["SqlOn"]]
        assert int(resp.header["nextBeginOffset"]) == 12  # past every message looked at, matched or not
        # a pull whose whole range is filtered out moves on at once
        none = raw_pull(pc, "sql-on", "SqlOn", "a > 100", "SQL92")
        assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and int(none.header["nextBeginOffset"]) == 12
        # the SDK's pull API gives the same set
        mq = next(q for q in pc.fetch_queues("SqlOn"))
        res = pc.pull(mq, 0, 32, EXPR, expression_type="SQL92")
        assert [m.body for m in res.messages] == [f"m{i}".encode() for i in topics["SqlOn"]]
    finally:
        pc.shutdown()


def test_bad_expression_and_switched_off_broker_are_refused(cluster: Cluster, topics: dict[str, list[int]]) -> None:
    pc = PullConsumer("sql-refused", cluster.namesrv).start()
    try:
        bad = raw_pull(pc, "sql-on", "SqlOn", "a = NULL", "SQL92")
        assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "cannot be compared" in bad.remark
        off = raw_pull(pc, "sql-off", "SqlOff", EXPR, "SQL92")
        assert off.code == ResponseCode.SYSTEM_ERROR
        assert off.remark == "The broker does not support consumer to filter message by SQL92"
        tag = raw_pull(pc, "sql-off", "SqlOff", "red", "TAG")  # tags still work there
        assert tag.code == ResponseCode.SUCCESS and len(decode_records(tag.body, "sql-off")) == 4
        # CHECK_CLIENT_CONFIG, which clients send at start for SQL92 subscriptions
        for broker, code in (("sql-on", ResponseCode.SUCCESS), ("sql-off", ResponseCode.SYSTEM_ERROR)):
            from broker_core.client.consumer.base import subscription_data
            from broker_core.remoting.client import run_sync
            body = json.dumps({"clientId": "x", "group": "g", "subscriptionData": subscription_data(
                parse_subscription("SqlOn", EXPR, "SQL92"), 1)}).encode()
            resp = run_sync(pc.instance.invoke(pc.instance.broker_addr(broker), RemotingCommand.request(
                RequestCode.CHECK_CLIENT_CONFIG, {}, body)))
            assert resp.code == code, (broker, resp.remark)
    finally:
        pc.shutdown()


def test_push_consumer_receives_exactly_the_matching_set(cluster: Cluster, topics: dict[str, list[int]]) -> None:
    got: list[MessageExt] = []
    done = threading.Event()
    want = len(topics["SqlOn"])

    def listener(msgs: list[MessageExt]) -> None:
        got.extend(msgs)
        if len(got) >= want:
            done.set()

    c = PushConsumer("sql-push", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    c.subscribe("SqlOn", EXPR, expression_type="SQL92")
    c.register_message_listener(listener)
    c.start()
    try:
        assert done.wait(30), f"got {len(got)} of {want}"
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in topics["SqlOn"])
    finally:
        c.shutdown()
    # a SQL92 subscription on a broker without enablePropertyFilter fails at start, with the broker's reason
    off = PushConsumer("sql-push-off", cluster.namesrv, consume_from="FIRST")
    off.subscribe("SqlOff", EXPR, expression_type="SQL92")
    off.register_message_listener(listener)
    with pytest.raises(ClientError, match="does not support consumer to filter message by SQL92"):
        off.start()
    off.shutdown()


def test_receive_hands_out_only_matching_messages_and_never_holds_the_others(
        cluster: Cluster, topics: dict[str, list[int]]) -> None:
    from broker_core.client import SimpleConsumer

    sc = SimpleConsumer("sql-receive", cluster.namesrv).start()
    try:
        sc.subscribe("SqlOn", EXPR, expression_type="SQL92")
        got: list[MessageExt] = []
        for _ in range(10):
            batch = sc.receive(max_num=2, invisible_duration=30)  # max_num counts messages, not runs of them
            assert len(batch) <= 2
            got += batch
            if not batch:
                break
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in topics["SqlOn"])
        for m in got:
            sc.ack(m)
        # nothing that was passed over is in flight: after the matching ones are acked nothing comes back
        assert sc.receive(max_num=32, invisible_duration=30) == []
        off = SimpleConsumer("sql-receive-off", cluster.namesrv).start()
        try:
            off.subscribe("SqlOff", EXPR, expression_type="SQL92")
            with pytest.raises(ClientError, match="does not support consumer to filter message by SQL92"):
                off.receive(max_num=4)
        finally:
            off.shutdown()
    finally:
        sc.shutdown()
