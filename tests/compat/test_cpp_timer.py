"""RocketMQ 5 timer properties set by a client not written here: the Apache C++ core (PyPI ``rocketmq`` 0.4.4)
sets ``TIMER_DELAY_MS`` / ``TIMER_DELIVER_MS`` as plain message properties (``set_property``), as a RocketMQ 5
producer does. The broker holds them in its timer until their time (never early), and refuses a delay past
``timerMaxDelaySec`` with MESSAGE_ILLEGAL, which this C++ client reports as a send error (with its generic "No
route info of this topic" text after its retries)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient
from tests.compat.cpp_driver import body_of, cpp, one_broker_cluster, spec
from tests.integration.cluster import Cluster, read_topic, wait_until

pytestmark = pytest.mark.integration

MAX_DELAY_SEC = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from one_broker_cluster(tmp_path_factory, "cpp-timer", f"timerMaxDelaySec={MAX_DELAY_SEC}\n")


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as a:
        yield a


def test_cpp_timer_messages_arrive_at_their_time_and_too_far_is_refused(cluster: Cluster,
                                                                       admin: AdminClient) -> None:
    admin.create_topic("CppTimer", 1, 1)
    sent_ms = int(time.time() * 1000)
    out = cpp(cluster, "produce", group="cpp-timer-producer", mode="sync", capture_errors=True, messages=[
        spec("CppTimer", b"delay-ms", props={"TIMER_DELAY_MS": "2000"}),
        spec("CppTimer", b"deliver-at", props={"TIMER_DELIVER_MS": str(sent_ms + 2500)}),
        spec("CppTimer", b"too-far", props={"TIMER_DELAY_SEC": str(MAX_DELAY_SEC + 5)}),
    ])
    ok, refused = out["results"][:2], out["results"][2]
    assert all(r.get("status") == "OK" for r in ok), out
    # the broker answers MESSAGE_ILLEGAL; this client retries and then reports only "No route info of this topic"
    # (DefaultMQProducer.cpp), so what shows the refusal is that nothing of it was stored (below)
    assert "error" in refused, refused

    wait_until(lambda: len(read_topic(cluster.namesrv, "CppTimer")) >= 2, timeout=60, what="the timer messages")
    got = cpp(cluster, "pull", group="cpp-timer-reader", topic="CppTimer", props=["TIMER_DELIVER_MS"])["messages"]
    assert sorted(body_of(m) for m in got) == [b"delay-ms", b"deliver-at"]
    for m in got:
        earliest = sent_ms + (2000 if body_of(m) == b"delay-ms" else 2500)
        assert m["store_timestamp"] >= earliest  # put to its topic only once its time came
        assert int(m["props"]["TIMER_DELIVER_MS"]) >= earliest
    held = read_topic(cluster.namesrv, "rmq_sys_wheel_timer")  # the timer's own records: the two held, no more
    assert sorted(m.body for m in held) == [b"delay-ms", b"deliver-at"]
