"""RocketMQ 5 timer messages over remoting: the properties a RocketMQ 5 producer sets (``TIMER_DELIVER_MS``,
``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``) hold a message in the broker's timer (the one gRPC's
``delivery_timestamp`` uses) until its time; never delivered early (the stored record's time is at least the
delivery time); a delay past ``timerMaxDelaySec`` is refused with MESSAGE_ILLEGAL and RocketMQ's remark. Sent
with our SDK here and with the Apache C++ client in tests/compat/test_cpp_timer.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, ClientError, Message, MessageExt, Producer
from broker_core.protocol import ResponseCode
from tests.integration.cluster import Cluster, read_topic, wait_until

pytestmark = pytest.mark.integration

MAX_DELAY_SEC = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("timer-remoting"))
    try:
        c.add_brokers_registered({"broker-a": f"timerMaxDelaySec={MAX_DELAY_SEC}\n"})
        yield c
    finally:
        c.close()


def delivered(cluster: Cluster, topic: str, count: int) -> list[MessageExt]:
    got: list[MessageExt] = []

    def enough() -> bool:
        got[:] = read_topic(cluster.namesrv, topic)
        return len(got) >= count
    wait_until(enough, timeout=60, what=f"{count} timer messages in {topic}")
    return got


def test_timer_properties_deliver_at_their_time_never_early(cluster: Cluster, admin: AdminClient,
                                                            producer: Producer) -> None:
    admin.create_topic("TimerSdk", 2, 2)
    now = int(time.time() * 1000)
    sends = {
        b"deliver-at": {"TIMER_DELIVER_MS": str(now + 2500)},
        b"delay-sec": {"TIMER_DELAY_SEC": "2"},
        b"delay-ms": {"TIMER_DELAY_MS": "2000"},
        b"past": {"TIMER_DELIVER_MS": str(now - 1000)},  # a time past: a plain message, at once
    }
    earliest = {}
    for body, props in sends.items():
        before = int(time.time() * 1000)
        r = producer.send(Message("TimerSdk", body, properties=props))
        assert r.msg_id
        delay_ms = int(props.get("TIMER_DELAY_MS", "0")) + 1000 * int(props.get("TIMER_DELAY_SEC", "0"))
        earliest[body] = int(props["TIMER_DELIVER_MS"]) if "TIMER_DELIVER_MS" in props else before + delay_ms
    got = delivered(cluster, "TimerSdk", 4)
    assert sorted(m.body for m in got) == sorted(sends)
    for m in got:
        assert m.store_timestamp >= earliest[m.body], m.body  # put to the topic only once its time came
        if m.body != b"past":
            # the delivery time the timer kept, as RocketMQ 5 consumers read it
            assert int(m.properties["TIMER_DELIVER_MS"]) >= earliest[m.body]
    assert "REAL_TOPIC" not in got[0].properties and got[0].topic == "TimerSdk"


def test_too_far_or_malformed_is_refused_and_a_delay_level_wins(cluster: Cluster, admin: AdminClient,
                                                                producer: Producer) -> None:
    admin.create_topic("TimerLimits", 1, 1)
    for props in ({"TIMER_DELAY_SEC": str(MAX_DELAY_SEC + 5)},
                  {"TIMER_DELIVER_MS": str(int(time.time() * 1000) + (MAX_DELAY_SEC + 5) * 1000)},
                  {"TIMER_DELAY_MS": "soon"}):
        with pytest.raises(ClientError) as err:
            producer.send(Message("TimerLimits", b"refused", properties=props))
        assert err.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert f"max delay {MAX_DELAY_SEC * 1000}ms" in str(err.value)
    # within the limit: accepted (held, not in the topic yet)
    producer.send(Message("TimerLimits", b"in-limit", properties={"TIMER_DELAY_SEC": str(MAX_DELAY_SEC - 5)}))
    # a delay level wins over the timer properties (RocketMQ's checkIfTimerMessage drops them): level 1 is 1 s
    producer.send(Message("TimerLimits", b"level", properties={"DELAY": "1", "TIMER_DELAY_SEC": "50"}))
    got = delivered(cluster, "TimerLimits", 1)
    assert [m.body for m in got] == [b"level"]
    assert not any(k.startswith("TIMER_") for k in got[0].properties)
