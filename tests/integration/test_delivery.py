"""Delivery semantics with real processes: retry back-off through %RETRY%, dead letters and resending
them, delay levels, and a broker killed while delayed messages are due. The broker runs with fast delay
levels (100 ms steps) so the back-off shape is real but short."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from broker_core.client import (
    AdminClient,
    ClientError,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionProducer,
    TransactionState,
    select_by_key,
)
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

LEVELS_MS = [100 * (i + 1) for i in range(18)]
FAST = ("messageDelayLevel=" + " ".join(f"{ms}ms" for ms in LEVELS_MS) + "\nscheduleDeliverIntervalMs=20\n"
        "transactionTimeOut=300\ntransactionCheckInterval=300\ntraceTopicEnable=true\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("delivery"))
    try:
        c.add_broker("broker-a", FAST)
        yield c
    finally:
        c.close()


def consumer(cluster: Cluster, group: str, topic: str, listener, **kw) -> PushConsumer:  # type: ignore[no-untyped-def]
    c = PushConsumer(group, cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0, **kw)
    c.subscribe(topic)
    c.register_message_listener(listener)
    return c.start()


def test_fail_three_times_then_succeed(cluster: Cluster, admin: AdminClient, producer: Producer):
    admin.create_topic("Retry", 1, 1)
    deliveries: list[tuple[float, MessageExt]] = []
    done = threading.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus | None:
        deliveries.append((time.monotonic(), msgs[0]))
        if len(deliveries) == 1:
            return ConsumeStatus.RECONSUME_LATER
        if len(deliveries) == 2:
            return None  # returning nothing also means "later"
        if len(deliveries) == 3:
            raise RuntimeError("boom")  # so does raising
        done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "retry-group", "Retry", listener)
    try:
        sent = producer.send(Message("Retry", b"flaky", keys="flaky-1"))
        assert done.wait(30), f"only {len(deliveries)} deliveries"
        time.sleep(0.5)
        assert len(deliveries) == 4  # and never again after success
        msgs = [m for _, m in deliveries]
        assert [m.reconsume_times for m in msgs] == [0, 1, 2, 3]
        assert {m.msg_id for m in msgs} == {sent.msg_id}
        assert all(m.topic == "Retry" and m.body == b"flaky" and m.keys == ["flaky-1"] for m in msgs)
        gaps_ms = [(b[0] - a[0]) * 1000 for a, b in itertools.pairwise(deliveries)]
        for gap, level in zip(gaps_ms, (3, 4, 5), strict=True):  # no earlier than the level's delay
            assert gap >= LEVELS_MS[level - 1], (gaps_ms, level)
    finally:
        c.shutdown()


def test_always_failing_goes_to_the_dlq_and_resend_brings_it_back(cluster: Cluster, admin: AdminClient,
                                                                  producer: Producer):
    admin.create_topic("Doomed", 1, 1)
    seen: list[MessageExt] = []
    c = consumer(cluster, "dlq-group", "Doomed", lambda msgs: seen.extend(msgs) or ConsumeStatus.RECONSUME_LATER,
                 max_reconsume_times=2)
    try:
        sent = producer.send(Message("Doomed", b"poison", tags="bad", keys="poison-1",
                                     properties={"region": "eu"}))
        wait_until(lambda: len(admin.dead_letters("dlq-group")) == 1, timeout=30, what="the dead letter")
        assert [m.reconsume_times for m in seen] == [0, 1, 2]
    finally:
        c.shutdown()
    time.sleep(0.3)
    assert len(seen) == 3  # never consumed from the DLQ
    (dead,) = admin.dead_letters("dlq-group")
    assert dead.topic == "%DLQ%dlq-group" and dead.msg_id == sent.msg_id
    assert dead.properties["DLQ_ORIGIN_TOPIC"] == "Doomed" and dead.properties["region"] == "eu"
    assert dead.tags == "bad" and dead.keys == ["poison-1"] and "3 times" in dead.properties["DLQ_REASON"]
    # resend with no consumer online, then a fresh consumer gets it on the original topic
    (result,) = admin.resend_dead_letters("dlq-group", [dead.offset_msg_id])
    assert result["ok"] and result["topic"] == "Doomed", result
    got: list[MessageExt] = []
    fresh = consumer(cluster, "fresh-group", "Doomed", lambda msgs: got.extend(msgs) or ConsumeStatus.CONSUME_SUCCESS)
    try:
        wait_until(lambda: any(m.properties.get("RESEND_FROM_DLQ") for m in got), what="the resent message")
        resent = next(m for m in got if m.properties.get("RESEND_FROM_DLQ"))
        assert resent.body == b"poison" and resent.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
        assert resent.msg_id == result["newMsgId"] != sent.msg_id and resent.reconsume_times == 0
    finally:
        fresh.shutdown()
    bad = admin.resend_dead_letters("dlq-group", [sent.offset_msg_id, "nothex"])
    assert not bad[0]["ok"] and "not a dead letter" in bad[0]["error"] and not bad[1]["ok"]


def test_delay_levels_are_never_early(cluster: Cluster, admin: AdminClient, producer: Producer):
    admin.create_topic("Later", 1, 1)
    received: dict[bytes, float] = {}
    def record(msgs: list[MessageExt]) -> ConsumeStatus:
        received.update({m.body: time.monotonic() for m in msgs})
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "later-group", "Later", record)
    try:
        sent_at = {}
        for level in range(1, 19):
            body = b"level-%d" % level
            sent_at[body] = time.monotonic()
            producer.send(Message("Later", body, delay_level=level))
        wait_until(lambda: len(received) == 18, timeout=30, what="every delayed message")
        for level in range(1, 19):
            body = b"level-%d" % level
            assert (received[body] - sent_at[body]) * 1000 >= LEVELS_MS[level - 1], level
        backlog = admin.delay_backlog(cluster.brokers["broker-a"].addr)
        assert all(v["waiting"] == 0 for v in backlog.values())
    finally:
        c.shutdown()


def test_broker_killed_while_delayed_messages_are_due_delivers_each_once(cluster: Cluster, admin: AdminClient,
                                                                         producer: Producer):
    admin.create_topic("Crash", 1, 1)
    sent = [producer.send(Message("Crash", b"c-%03d" % i, delay_level=18)) for i in range(200)]  # 1.8 s
    broker = cluster.brokers["broker-a"]
    time.sleep(1.8)
    port = broker.port
    broker.kill()  # while (or just before) the due messages are being delivered
    broker.start(port)
    got: list[MessageExt] = []
    c = consumer(cluster, "crash-group", "Crash", lambda msgs: got.extend(msgs) or ConsumeStatus.CONSUME_SUCCESS)
    try:
        wait_until(lambda: len(got) >= 200, timeout=60, what="every delayed message after the restart")
        time.sleep(1.0)
        assert sorted(m.msg_id for m in got) == sorted(r.msg_id for r in sent)  # each exactly once
    finally:
        c.shutdown()


def test_large_bodies_are_compressed_and_transparent(cluster: Cluster, admin: AdminClient, producer: Producer):
    admin.create_topic("Big", 1, 1)
    body = b"compressible " * 2000  # 26 KB
    sent = producer.send(Message("Big", body))
    got: list[MessageExt] = []
    c = consumer(cluster, "big-group", "Big", lambda msgs: got.extend(msgs) or ConsumeStatus.CONSUME_SUCCESS)
    try:
        wait_until(lambda: len(got) == 1, what="the big message")
        assert got[0].body == body and got[0].sys_flag & 1  # stored compressed (COMPRESSED_FLAG)
        stored = admin.view_message(sent.offset_msg_id)
        assert stored.body == body
    finally:
        c.shutdown()


def test_ordered_per_key_with_failures_and_a_consumer_restart(cluster: Cluster, admin: AdminClient,
                                                              producer: Producer):
    admin.create_topic("Ordered", 4, 4)
    keys, per_key = 10, 1000
    lock = threading.Lock()
    sessions: list[dict[str, list[int]]] = []
    rnd = __import__("random").Random(7)

    def listener_for(session: dict[str, list[int]]):  # type: ignore[no-untyped-def]
        def listen(msgs: list[MessageExt]) -> ConsumeStatus:
            m = msgs[0]
            if rnd.random() < 0.01:
                return ConsumeStatus.RECONSUME_LATER  # blocks the queue, retried in place
            key, seq = m.body.decode().split(":")
            with lock:
                session.setdefault(key, []).append(int(seq))
            return ConsumeStatus.CONSUME_SUCCESS
        return listen

    def start(name: str) -> PushConsumer:
        session: dict[str, list[int]] = {}
        sessions.append(session)
        c = PushConsumer("ordered-group", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0,
                         suspend_current_queue_time=0.02, lock_interval=1.0)
        c.subscribe("Ordered")
        c.register_message_listener(listener_for(session), orderly=True)
        return c.start()

    first, second = start("first"), start("second")
    for i in range(per_key):
        for k in range(keys):
            producer.send(Message("Ordered", f"k{k}:{i}".encode()), selector=select_by_key, arg=f"k{k}")
        if i == per_key // 2:
            first.shutdown()  # one consumer restart mid-stream
            first = start("first-again")
    def consumed(key: str) -> set[int]:
        return {s for session in sessions for s in session.get(key, [])}

    try:
        wait_until(lambda: all(len(consumed(f"k{k}")) == per_key for k in range(keys)), timeout=120,
                   what="every ordered message")
    finally:
        first.shutdown()
        second.shutdown()
    for k in range(keys):
        for session in sessions:  # within one consumer's life, each key's messages arrive in sent order
            seq = session.get(f"k{k}", [])
            assert seq == sorted(seq), f"key k{k} out of order"
        merged: list[int] = []
        for session in sessions:
            merged += [s for s in session.get(f"k{k}", []) if not merged or s > merged[-1]]
        assert merged == list(range(per_key))


def _orderly_run(cluster: Cluster, producer: Producer, topic: str, group: str, fails: int | None,
                 **kw: object) -> tuple[list[str], dict[str, int]]:
    """One orderly consumer on a one-queue topic: "poison" fails ``fails`` times (None: always); returns the
    bodies in consumption order and the attempts per body."""
    lock = threading.Lock()
    order: list[str] = []
    attempts: dict[str, int] = {}

    def listen(msgs: list[MessageExt]) -> ConsumeStatus:
        body = msgs[0].body.decode()
        with lock:
            attempts[body] = attempts.get(body, 0) + 1
            if body == "poison" and (fails is None or attempts[body] <= fails):
                return ConsumeStatus.RECONSUME_LATER
            order.append(body)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group, cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0, lock_interval=1.0,
                     suspend_current_queue_time=0.01, **kw)  # type: ignore[arg-type]
    c.subscribe(topic)
    c.register_message_listener(listen, orderly=True)
    c.start()
    try:
        for body in ("m0", "poison", "m1", "m2"):
            producer.send(Message(topic, body.encode()))
        wait_until(lambda: order[-1:] == ["m2"], what="the queue to drain")
    finally:
        c.shutdown()
    return order, attempts


def test_orderly_retries_in_place_without_limit_unless_a_maximum_is_given(cluster: Cluster, admin: AdminClient,
                                                                         producer: Producer):
    admin.create_topic("OrderlyRetry", 1, 1)  # one queue: the later messages must wait behind the failing one
    order, attempts = _orderly_run(cluster, producer, "OrderlyRetry", "orderly-in-place", fails=20)
    assert order == ["m0", "poison", "m1", "m2"] and attempts["poison"] == 21
    assert admin.dead_letters("orderly-in-place") == []  # 20 failures, past the concurrent default of 16: no DLQ

    admin.create_topic("OrderlyDlq", 1, 1)
    order, attempts = _orderly_run(cluster, producer, "OrderlyDlq", "orderly-dlq", fails=None, max_reconsume_times=3)
    assert order == ["m0", "m1", "m2"] and attempts["poison"] == 4  # the first try and 3 retries, then the DLQ
    dead = admin.dead_letters("orderly-dlq")
    assert [m.body for m in dead] == [b"poison"] and dead[0].properties.get("DLQ_ORIGIN_TOPIC") == "OrderlyDlq"


def test_receive_ack_and_invisible_time(cluster: Cluster, admin: AdminClient, producer: Producer):
    admin.create_topic("Pop", 2, 2)
    for i in range(6):
        producer.send(Message("Pop", f"pop-{i}".encode(), tags="A" if i < 5 else "B"))
    sc = SimpleConsumer("pop-group", cluster.namesrv, max_reconsume_times=1).start()
    sc.subscribe("Pop", "A")
    try:
        first = sc.receive(max_num=10, invisible_duration=1.0)
        assert sorted(m.body for m in first) == [f"pop-{i}".encode() for i in range(5)]
        assert all(m.reconsume_times == 0 and m.receipt_handle for m in first)
        assert sc.receive(max_num=10, invisible_duration=1.0) == []  # all invisible now
        acked, unacked = first[:3], first[3:]
        for m in acked:
            sc.ack(m)
        with pytest.raises(ClientError, match="unknown or was already used"):
            sc.ack(acked[0])
        kept = unacked[0]
        sc.change_invisible_duration(kept, 30.0)  # this one stays invisible
        again: list[MessageExt] = []
        wait_until(lambda: again.extend(sc.receive(max_num=10, invisible_duration=1.0, wait=1.0)) or
                   len(again) >= 1, timeout=15, what="the unacked message to reappear")
        assert [m.body for m in again] == [unacked[1].body] and again[0].reconsume_times == 1
        assert again[0].msg_id == unacked[1].msg_id
        with pytest.raises(ClientError, match="unknown or was already used"):
            sc.ack(unacked[1])  # its old handle died when it was delivered again
        sc.ack(kept)
        # never acked again: past maxReconsumeTimes=1 it goes to the DLQ
        wait_until(lambda: any(m.body == unacked[1].body for m in admin.dead_letters("pop-group")), timeout=15,
                   what="the dead letter")
        assert sc.receive(max_num=10, invisible_duration=1.0, wait=0.5) == []
        with pytest.raises(ClientError, match="malformed"):
            kept.receipt_handle = "garbage"
            sc.ack(kept)
    finally:
        sc.shutdown()


def test_receive_waits_for_a_message(cluster: Cluster, admin: AdminClient, producer: Producer):
    admin.create_topic("PopWait", 1, 1)
    sc = SimpleConsumer("popwait-group", cluster.namesrv).start()
    sc.subscribe("PopWait")
    try:
        threading.Timer(0.5, lambda: producer.send(Message("PopWait", b"arrived"))).start()
        got = sc.receive(max_num=1, invisible_duration=5, wait=10)
        assert [m.body for m in got] == [b"arrived"]
        sc.ack(got[0])
    finally:
        sc.shutdown()


def test_transactions_commit_rollback_and_check_back(cluster: Cluster, admin: AdminClient):
    admin.create_topic("Tx", 1, 1)
    checked: list[str] = []

    def checker(msg: MessageExt) -> TransactionState:
        checked.append(msg.keys[0])
        return TransactionState.COMMIT_MESSAGE if msg.keys[0] == "u-commit" else TransactionState.ROLLBACK_MESSAGE

    tp = TransactionProducer("tx-producers", cluster.namesrv, checker).start()
    got: list[MessageExt] = []
    c = consumer(cluster, "tx-group", "Tx", lambda msgs: got.extend(msgs) or ConsumeStatus.CONSUME_SUCCESS)
    try:
        def execute(outcome: TransactionState) -> Callable[[Message, object], TransactionState]:
            return lambda msg, arg: outcome

        ok, _ = tp.send_message_in_transaction(Message("Tx", b"committed", keys="c"),
                                               execute(TransactionState.COMMIT_MESSAGE))
        tp.send_message_in_transaction(Message("Tx", b"rolled-back", keys="r"),
                                       execute(TransactionState.ROLLBACK_MESSAGE))
        tp.send_message_in_transaction(Message("Tx", b"unknown-commit", keys="u-commit"),
                                       execute(TransactionState.UNKNOW))
        tp.send_message_in_transaction(Message("Tx", b"unknown-rollback", keys="u-rollback"),
                                       lambda msg, arg: 1 / 0)  # a failing local transaction is "unknown"
        wait_until(lambda: {m.body for m in got} == {b"committed", b"unknown-commit"}, timeout=30,
                   what="committed messages")
        wait_until(lambda: sorted(set(checked)) == ["u-commit", "u-rollback"], timeout=30, what="check-backs")
        time.sleep(1.5)  # a rolled-back message would have shown up by now
        assert sorted(m.body for m in got) == [b"committed", b"unknown-commit"]
        assert next(m for m in got if m.body == b"committed").msg_id == ok.msg_id
        assert "r" not in checked and "c" not in checked  # resolved ones are never checked
    finally:
        c.shutdown()
        tp.shutdown()


def test_trace_of_a_retried_dead_lettered_and_resent_message(cluster: Cluster, admin: AdminClient,
                                                             producer: Producer):
    admin.create_topic("Traced", 1, 1)
    c = consumer(cluster, "trace-group", "Traced", lambda msgs: ConsumeStatus.RECONSUME_LATER,
                 max_reconsume_times=2, enable_trace=True)
    try:
        sent = producer.send(Message("Traced", b"follow me", keys="trace-key"))
        wait_until(lambda: len(admin.dead_letters("trace-group")) == 1, timeout=30, what="the dead letter")
    finally:
        c.shutdown()
    (dead,) = admin.dead_letters("trace-group")
    (resent,) = admin.resend_dead_letters("trace-group", [dead.offset_msg_id])

    lifecycle = ["stored", "delayed", "delivered-after-delay", "delivered", "consumed", "reconsume-later", "retry",
                 "dead-lettered", "resent"]

    def trace() -> list[dict[str, object]]:
        records, _ = admin.query_message("RMQ_SYS_TRACE_TOPIC", sent.msg_id, max_num=200)
        events = [json.loads(m.body) for m in records]
        # by time; events within the same millisecond fall back to lifecycle order
        return sorted(events, key=lambda e: (e["timestamp"], lifecycle.index(e["type"])))

    expected = ["stored", "delivered", "reconsume-later", "retry", "delivered-after-delay", "delivered",
                "reconsume-later", "retry", "delivered-after-delay", "delivered", "reconsume-later", "dead-lettered",
                "resent"]
    wait_until(lambda: [e["type"] for e in trace()] == expected, timeout=15, what=f"the trace {expected}")
    events = trace()
    assert all(e["msgId"] == sent.msg_id for e in events)
    assert [e["reconsumeTimes"] for e in events if e["type"] == "delivered"] == [0, 1, 2]
    assert [e["extra"]["delayLevel"] for e in events if e["type"] == "retry"] == [3, 4]
    assert {e["group"] for e in events if e["type"] in ("delivered", "reconsume-later")} == {"trace-group"}
    assert events[-1]["extra"]["newMsgId"] == resent["newMsgId"] and events[0]["keys"] == ["trace-key"]


def test_tag_hash_collisions_are_filtered_by_the_client(cluster: Cluster, admin: AdminClient, producer: Producer):
    from broker_core.client import PullConsumer
    from broker_core.codec.hashing import tag_hash

    assert tag_hash("Aa") == tag_hash("BB")  # Java String.hashCode collides
    admin.create_topic("Tags", 1, 1)
    for tag in ("Aa", "BB", "Cc", "Aa"):
        producer.send(Message("Tags", tag.encode(), tags=tag))
    pc = PullConsumer("tags-group", cluster.namesrv).start()
    try:
        mq = pc.fetch_queues("Tags")[0]
        assert [m.body for m in pc.pull(mq, 0, 32, "Aa").messages] == [b"Aa", b"Aa"]
        assert [m.body for m in pc.pull(mq, 0, 32, "BB || Cc").messages] == [b"BB", b"Cc"]
    finally:
        pc.shutdown()
