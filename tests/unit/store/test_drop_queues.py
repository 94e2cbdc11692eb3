"""MessageStore.delete_topic and clean_expired_consume_queues (RocketMQ's cleanExpiredConsumerQueue, admin code
306): a queue goes, with its files, directory and queue offset, only when asked for (its topic) or when retention
deleted every record it points to; the delay topic's queues are never cleaned; the others stay readable."""

from __future__ import annotations

from broker_core.codec.names import SCHEDULE_TOPIC
from broker_core.store import GetStatus
from broker_core.store.message import MessageInner


def put(store, topic: str, n: int, queue_id: int = 0, size: int = 2000) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        assert store.put_message(MessageInner(topic, b"%06d" % i + b"." * size, queue_id)).ok
    store.dispatch()


def test_delete_topic_drops_its_queues_files_and_offsets(open_store) -> None:  # type: ignore[no-untyped-def]
    store = open_store()
    put(store, "Gone", 3, 0)
    put(store, "Gone", 2, 1)
    put(store, "Kept", 2, 0)
    root = store.store_config.consume_queue_dir
    assert (root / "Gone" / "0").is_dir()
    assert store.delete_topic("Gone") == 2
    assert not (root / "Gone").exists() and store.queue_ids("Gone") == []
    assert ("Gone", 0) not in store.commit_log.topic_queue_table
    assert store.get_max_offset_in_queue("Kept", 0) == 2
    put(store, "Gone", 1, 0)  # a topic made again starts at queue offset 0
    assert store.get_max_offset_in_queue("Gone", 0) == 1


def test_clean_expired_consume_queues_drops_only_queues_retention_emptied(open_store) -> None:  # type: ignore[no-untyped-def]
    store = open_store(disk_probe=lambda _path: 0.86)  # past diskSpaceCleanForciblyRatio: retention deletes at once
    put(store, "Old", 5)  # in the first segment only
    put(store, SCHEDULE_TOPIC, 2)  # the delay topic: never cleaned here
    put(store, "New", 2)
    assert store.clean_expired_consume_queues() == 0  # nothing deleted yet: every queue still points at records
    while len(store.commit_log.mapped_file_queue.files) < 3:
        put(store, "New", 10)
    assert store.clean_expired_files().deleted_commit_log_files  # all but the active segment
    assert store.commit_log.min_offset() > 0
    assert store.clean_expired_consume_queues() == 1
    assert store.queue_ids("Old") == [] and not (store.store_config.consume_queue_dir / "Old").exists()
    assert store.queue_ids(SCHEDULE_TOPIC) == [0] and store.queue_ids("New") == [0]
    assert store.get_message("New", 0, store.get_max_offset_in_queue("New", 0) - 1).status is GetStatus.FOUND
    assert store.clean_expired_consume_queues() == 0
