"""The SDK's client instances and hooks on a real broker: clients given one ``instance_name`` share one instance
(one client id, one heartbeat), a second producer or consumer of a group on an instance is refused, the instance
closes with its last client, and send/consume hooks see every send and listener call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from broker_core.client import AdminClient, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from broker_core.client.hooks import ConsumeContext, SendContext
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("instances"))
    try:
        c.add_broker("broker-a")
        yield c
    finally:
        c.close()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def send_message_before(self, ctx: SendContext) -> None:
        with self.lock:
            self.events.append(("send-before", [m.body for m in ctx.messages]))

    def send_message_after(self, ctx: SendContext) -> None:
        with self.lock:
            self.events.append(("send-after", (ctx.result is not None, type(ctx.exception).__name__ if
                                               ctx.exception else None)))

    def consume_message_before(self, ctx: ConsumeContext) -> None:
        with self.lock:
            self.events.append(("consume-before", [m.body for m in ctx.messages]))

    def consume_message_after(self, ctx: ConsumeContext) -> None:
        with self.lock:
            self.events.append(("consume-after", (ctx.success, ctx.status)))


class Broken:
    def send_message_before(self, ctx: SendContext) -> None:
        raise RuntimeError("a broken hook")

    def send_message_after(self, ctx: SendContext) -> None:
        raise RuntimeError("a broken hook")


def test_named_instances_are_shared_and_groups_are_unique(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("Shared", 1, 1)
    p1 = Producer("shared-p1", cluster.namesrv, instance_name="svc").start()
    p2 = Producer("shared-p2", cluster.namesrv, instance_name="svc").start()
    other = Producer("shared-p1", cluster.namesrv, instance_name="other").start()  # another instance: allowed
    try:
        assert p1.instance is p2.instance and other.instance is not p1.instance
        with pytest.raises(ValueError, match=r"The producer group\[shared-p1\] has been created before"):
            Producer("shared-p1", cluster.namesrv, instance_name="svc").start()
        got = threading.Event()
        c = PushConsumer("shared-c", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0,
                         instance=p1.instance)
        c.subscribe("Shared")
        c.register_message_listener(lambda msgs: (got.set(), ConsumeStatus.CONSUME_SUCCESS)[1])
        c.start()
        p2.send(Message("Shared", b"through the shared instance"))
        assert got.wait(30)
        wait_until(lambda: [x["clientId"] for x in admin.consumer_connections("shared-c")] == [p1.instance.client_id],
                   timeout=30, what="the consumer online under the shared client id")
        c.shutdown()
        p1.shutdown()
        assert not p2.instance.closed  # p2 still uses it
        p2.send(Message("Shared", b"still open"))
    finally:
        p2.shutdown()
        other.shutdown()
    assert p2.instance.closed  # closed with its last client
    again = Producer("shared-p1", cluster.namesrv, instance_name="svc").start()  # the name can be used again
    again.shutdown()


def test_send_and_consume_hooks(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topic("Hooked", 1, 1)
    rec = Recorder()
    producer = Producer("hooked-p", cluster.namesrv)
    producer.register_send_message_hook(rec)
    producer.register_send_message_hook(Broken())  # logged, never fails the send
    producer.start()
    done = threading.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        if msgs[0].body == b"fail-once" and msgs[0].reconsume_times == 0:
            raise RuntimeError("first try fails")
        if msgs[0].body == b"fail-once":
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("hooked-c", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    c.subscribe("Hooked")
    c.register_message_listener(listener)
    c.register_consume_message_hook(rec)
    c.start()
    try:
        producer.send(Message("Hooked", b"sync"))
        producer.send_async(Message("Hooked", b"async")).result(10)
        producer.send_oneway(Message("Hooked", b"fail-once"))
        with pytest.raises(Exception, match="body"):
            producer.send(Message("Hooked", b""))  # refused by the client: the after still runs, with the error
        assert done.wait(60)
        wait_until(lambda: ("consume-after", (True, "CONSUME_SUCCESS")) in rec.events and len(
            [e for e in rec.events if e[0] == "send-after"]) == 4, timeout=10, what="every hook call")
        sends = [e for e in rec.events if e[0].startswith("send")]
        assert ("send-before", [b"sync"]) in sends and ("send-before", [b"async"]) in sends
        assert ("send-after", (True, None)) in sends and ("send-after", (False, "ClientError")) in sends
        consumes = [e for e in rec.events if e[0].startswith("consume")]
        assert ("consume-after", (False, "EXCEPTION")) in consumes  # the failing first try
        befores = [e for e in consumes if e[0] == "consume-before"]
        assert sum(1 for e in befores if e[1] == [b"fail-once"]) == 2  # the failure and its retry
    finally:
        c.shutdown()
        producer.shutdown()
