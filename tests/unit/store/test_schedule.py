"""Delay levels in the store, with a manual clock: due times, progress, restart without duplicates."""

from __future__ import annotations

from broker_core.codec.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC
from broker_core.store import GetStatus, MessageStore
from broker_core.store.message import MessageInner
from broker_core.store.schedule import PROPERTY_SCHEDULE_ORIGIN, SCHEDULE_TOPIC

LEVELS = "1s 5s 10s"


def bodies(store, topic="T", queue_id=0):  # type: ignore[no-untyped-def]
    store.dispatch()
    res = store.get_message(topic, queue_id, 0, 100)
    return [m.body for m in res.messages] if res.status is GetStatus.FOUND else []


def test_delayed_message_waits_in_the_schedule_topic_until_due(open_store, clock):
    store = open_store(message_delay_level=LEVELS)
    start = clock.now_ms()
    r = store.put_message(MessageInner("T", b"later", 0, properties={PROPERTY_DELAY_TIME_LEVEL: "2"}))
    store.put_message(MessageInner("T", b"now", 0))
    assert r.ok
    assert bodies(store) == [b"now"]
    parked = store.get_message(SCHEDULE_TOPIC, 1, 0).messages[0]
    assert parked.properties[PROPERTY_REAL_TOPIC] == "T" and parked.uniq_key
    assert store.schedule.backlog()[2]["nextDueTimestamp"] == start + 5000
    clock.set(start + 4999)
    assert store.deliver_delayed().delivered == 0
    clock.set(start + 5000)
    report = store.deliver_delayed()
    assert report.delivered == 1 and report.per_level == {2: 1}
    assert bodies(store) == [b"now", b"later"]
    delivered = store.get_message("T", 0, 1).messages[0]
    assert delivered.uniq_key == parked.uniq_key  # same message id
    assert PROPERTY_DELAY_TIME_LEVEL not in delivered.properties
    assert store.deliver_delayed().delivered == 0  # idempotent
    assert store.schedule.backlog()[2]["waiting"] == 0


def test_levels_are_delivered_in_due_order_and_progress_persists(open_store, clock, tmp_path):
    store = open_store(message_delay_level=LEVELS)
    start = clock.now_ms()
    for level in (3, 1, 2, 1):
        store.put_message(MessageInner("T", b"L%d" % level, 0, properties={PROPERTY_DELAY_TIME_LEVEL: str(level)}))
    store.put_message(MessageInner("T", b"L99", 0, properties={PROPERTY_DELAY_TIME_LEVEL: "99"}))  # capped to 3
    clock.set(start + 1000)
    assert store.deliver_delayed().delivered == 2
    clock.set(start + 10_000)
    assert store.deliver_delayed().delivered == 3
    assert bodies(store) == [b"L1", b"L1", b"L2", b"L3", b"L99"]
    cfg = store.config
    store.shutdown()
    assert (cfg.config_dir / "delayOffset.json").exists()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert again.deliver_delayed().delivered == 0
        assert len(bodies(again)) == 5
    finally:
        again.shutdown()


def test_restart_after_a_crash_mid_delivery_delivers_exactly_once(open_store, clock):
    store = open_store(message_delay_level=LEVELS)
    start = clock.now_ms()
    for i in range(20):
        store.put_message(MessageInner("T", b"d%02d" % i, 0, properties={PROPERTY_DELAY_TIME_LEVEL: "1"}))
    clock.set(start + 1000)
    store.schedule.persist = lambda: None  # the crash comes before the progress reaches the disk
    assert store.deliver_delayed().delivered == 20
    cfg = store.config
    store.shutdown()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        report = again.deliver_delayed()
        assert report.delivered == 0 and report.skipped_duplicates == 20
        got = bodies(again)
        assert sorted(got) == [b"d%02d" % i for i in range(20)]
        assert all(m.properties[PROPERTY_SCHEDULE_ORIGIN].startswith("1:")
                   for m in again.get_message("T", 0, 0, 100).messages)
    finally:
        again.shutdown()


def test_recovery_rebuilds_deliver_times_from_the_commit_log(open_store, clock):
    store = open_store(message_delay_level=LEVELS)
    start = clock.now_ms()
    store.put_message(MessageInner("T", b"x", 0, properties={PROPERTY_DELAY_TIME_LEVEL: "3"}))
    cfg = store.config
    store.shutdown()
    for path in sorted(cfg.store.consume_queue_dir.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    cfg.store.abort_path.touch()
    cfg.store.checkpoint_path.unlink()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert again.schedule.backlog()[3]["nextDueTimestamp"] == start + 10_000
        clock.set(start + 10_000)
        assert again.deliver_delayed().delivered == 1
    finally:
        again.shutdown()
