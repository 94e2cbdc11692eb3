"""The local offset file of BROADCASTING consumers: RocketMQ's path, atomic replacement, the .bak fallback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.client.consumer.offset_store import LocalFileOffsetStore, local_offset_path
from broker_core.client.message import MessageQueue

MQ = MessageQueue("T", "broker-a", 1)


def test_path_is_rocketmqs_layout(tmp_path: Path) -> None:
    path = local_offset_path(tmp_path, "10.0.0.5", "DEFAULT", "g")
    assert path == tmp_path / "10.0.0.5@DEFAULT" / "g" / "offsets.json"


def test_offsets_persist_and_reload_and_a_broken_file_falls_back_to_the_backup(tmp_path: Path) -> None:
    path = local_offset_path(tmp_path, "10.0.0.5", "DEFAULT", "g")
    store = LocalFileOffsetStore(path)
    asyncio.run(store.update(MQ, 7))
    asyncio.run(store.persist())
    asyncio.run(store.update(MQ, 9))
    asyncio.run(store.persist())
    assert asyncio.run(LocalFileOffsetStore(path).read(MQ)) == 9
    assert not path.with_name("offsets.json.tmp").exists()
    path.write_text("{not json")  # a damaged file: the previous version is used
    assert asyncio.run(LocalFileOffsetStore(path).read(MQ)) == 7
    path.unlink()
    path.with_name("offsets.json.bak").write_text('{"T@broker-a#1": "x"}')  # wrong shape: nothing stored
    assert asyncio.run(LocalFileOffsetStore(path).read(MQ)) is None
