"""The topic table's incremental serialized forms and its coalescing topics.json writer
(broker_core/server/topics_file.py), and a burst of topic creations costing one registration."""

from __future__ import annotations

import asyncio
import json
import random
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from broker_core.codec.config_file import read_config_file
from broker_core.codec.fastjson import dumps_fastjson, loads_fastjson
from broker_core.config import BrokerConfig
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.server import topics_file
from broker_core.server.admin import AdminProcessor
from broker_core.server.controller import BrokerController
from broker_core.server.state import TopicConfig, TopicConfigManager


def _random_config(rng: random.Random, i: int) -> TopicConfig:
    return TopicConfig(f"T{rng.randrange(10**6):06d}-{i}", rng.randint(1, 16), rng.randint(1, 16),
                       rng.choice([2, 4, 6, 7]), rng.random() < 0.3, rng.choice(["SINGLE_TAG", "MULTI_TAG"]),
                       rng.randint(0, 3), rng.random() < 0.2)


def test_joined_forms_equal_a_full_encode_through_changes(tmp_path: Path) -> None:
    rng = random.Random(7)
    topics = TopicConfigManager(tmp_path)
    names: list[str] = []
    for step in range(6):
        batch = [_random_config(rng, step * 100 + i) for i in range(40)]
        topics.upsert_many(batch)
        names += [c.topic_name for c in batch]
        topics.upsert(TopicConfig(names[step], 3, 3))  # a replace: the cached fragment must not be reused
        topics.delete(names[-1])
        names.pop()
        for pretty in (False, True):
            assert topics.encode(pretty) == dumps_fastjson(topics.wrapper(), pretty)
        assert (tmp_path / "topics.json").read_text() == topics.encode(pretty=True)
    topics.upsert(TopicConfig("Odd\"Name\\é", 1, 1))  # escapes as fastjson writes them
    assert topics.encode(True) == dumps_fastjson(topics.wrapper(), True)
    assert loads_fastjson(topics.encode())["topicConfigTable"]["Odd\"Name\\é"]["readQueueNums"] == 1
    assert TopicConfigManager(tmp_path).table == topics.table  # and it reads back


def test_registration_bodies_are_the_full_table_in_name_order(tmp_path: Path) -> None:
    from broker_core.namesrv.server import _registration_body
    from broker_core.server import registration

    topics = TopicConfigManager(tmp_path)
    rng = random.Random(3)
    topics.upsert_many([_random_config(rng, i) for i in range(200)])
    topics.upsert(TopicConfig("A-first", 2, 1))
    cfg = BrokerConfig()
    for compressed in (True, False):
        cfg.compressed_register = compressed
        cmd = registration.request(cfg, "127.0.0.1:1", topics, "")
        table, version = _registration_body(cmd.body, compressed=compressed)
        assert list(table) == sorted(topics.table)
        assert version["counter"] == topics.data_version
        assert table["A-first"]["readQueueNums"] == 2 and table["A-first"]["writeQueueNums"] == 1
    cfg.compressed_register = True
    raw = zlib.decompress(registration.request(cfg, "127.0.0.1:1", topics, "").body)
    n = struct.unpack(">i", raw[:4])[0]
    assert struct.unpack(">i", raw[4 + n:8 + n])[0] == len(topics.table)
    assert raw[8 + n:].startswith(struct.pack(">i", len(b"A-first 2 1 6 SINGLE_TAG")) + b"A-first 2 1 6 SINGLE_TAG")


def test_a_burst_of_changes_during_a_write_is_one_more_write_with_the_last_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topics = TopicConfigManager(tmp_path)
    writes_before = topics.writer.writes
    entered, release = threading.Event(), threading.Event()
    real = topics_file.write_config_file

    def slow_write(path: Path, text: str) -> None:
        entered.set()
        assert release.wait(10)
        real(path, text)

    monkeypatch.setattr(topics_file, "write_config_file", slow_write)
    first = topics.change({"First": TopicConfig("First")}, ())
    assert entered.wait(10)  # the writer holds the first state
    seqs = [topics.change({f"B{i}": TopicConfig(f"B{i}", i % 8 + 1, 1)}, ()) for i in range(50)]
    last = topics.change({"B7": TopicConfig("B7", 5, 5)}, ("B3",))
    release.set()
    topics.wait_durable(last)
    topics.wait_durable(first)
    assert topics.writer.writes - writes_before == 2  # the first state, then every later change at once
    assert seqs[-1] < last
    doc = read_config_file(tmp_path / "topics.json")
    table = doc["topicConfigTable"]
    assert "First" in table and "B49" in table and "B3" not in table
    assert table["B7"]["readQueueNums"] == 5  # the last state wins
    assert doc["dataVersion"]["counter"] == topics.data_version


def test_a_failed_write_fails_its_waiters_and_the_next_change_writes_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topics = TopicConfigManager(tmp_path)
    real = topics_file.write_config_file

    def broken(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(topics_file, "write_config_file", broken)
    with pytest.raises(OSError, match="No space"):
        topics.upsert(TopicConfig("Lost"))

    async def on_loop() -> None:
        with pytest.raises(OSError, match="No space"):
            await topics.durable(topics.change({"Lost2": TopicConfig("Lost2")}, ()))

    asyncio.run(on_loop())
    monkeypatch.setattr(topics_file, "write_config_file", real)
    topics.upsert(TopicConfig("Kept"))
    assert {"Lost", "Lost2", "Kept"} <= set(read_config_file(tmp_path / "topics.json")["topicConfigTable"])


def test_a_burst_of_code_17_creations_is_one_registration_carrying_all(tmp_path: Path) -> None:
    cfg = BrokerConfig().with_store_dir(tmp_path)
    cfg.compressed_register = True
    ctl = BrokerController(cfg)
    ctl.namesrv_addrs = ["127.0.0.1:1"]
    sent: list[RemotingCommand] = []

    async def name_server(addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        sent.append(cmd)
        await asyncio.sleep(0.05)  # a name server applying a registration takes a while
        return cmd.response(ResponseCode.SUCCESS)

    ctl.namesrv_client.invoke = name_server  # type: ignore[method-assign]
    admin = AdminProcessor(ctl)
    names = [f"Burst{i:02d}" for i in range(20)]

    async def burst() -> list[Any]:
        return await asyncio.gather(*(admin.create_topic(RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": n, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}),
            None) for n in names))  # type: ignore[arg-type]

    try:
        answers = asyncio.run(burst())
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        registrations = [c for c in sent if c.code == RequestCode.REGISTER_BROKER]
        assert len(registrations) == 1
        from broker_core.namesrv.server import _registration_body

        table, version = _registration_body(registrations[0].body, compressed=True)
        assert set(names) <= set(table)
        assert version["counter"] == ctl.topics.data_version
        on_disk = json.loads(json.dumps(read_config_file(tmp_path / "config" / "topics.json")))
        assert set(names) <= set(on_disk["topicConfigTable"])
    finally:
        ctl.store.shutdown()
