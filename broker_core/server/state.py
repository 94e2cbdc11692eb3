"""Broker state persisted under ``config/`` in RocketMQ 4.9's files (reference §7.5): topic configs
(``topics.json``, a ``TopicConfigSerializeWrapper``), consumer offsets (``consumerOffset.json``) and subscription
groups (``subscriptionGroup.json``, a ``SubscriptionGroupWrapper``).

Each manager is thread-safe, keeps its state in memory, and writes its file the way RocketMQ does when asked
(``.tmp``, old content to ``.bak``, rename; :mod:`broker_core.codec.config_file`): topics and groups on every
change, offsets on a timer and at shutdown. ``topics.json`` is written by a thread of its own that coalesces
bursts of changes, from per-topic text cached across writes (:mod:`broker_core.server.topics_file`); a change
is acknowledged only once a synced file holds it. Files are read with RocketMQ's fallback to ``.bak``, in the Java
form (camelCase keys, unquoted integer keys) and in the snake_case form earlier versions of this product
wrote; fields unknown to 4.x (5.x's ``attributes``) are ignored. The same JSON is the body of the admin codes
that return these tables (21, 43, 201).
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from broker_core.codec.config_file import read_config_file, write_config_file
from broker_core.codec.fastjson import _encode_str, dumps_fastjson, items
from broker_core.server.topics_file import (
    Fragments,
    TopicsFileWriter,
    TopicSnapshot,
    compact_entry,
    compact_text,
    file_text,
    pretty_entry,
    pretty_entry_of,
    wrapper_text,
)

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
DEFAULT_PERM = PERM_READ | PERM_WRITE

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


@functools.lru_cache(maxsize=4096)  # a few dozen distinct keys, read once per topic/group at start
def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


@functools.lru_cache(maxsize=64)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w.title() for w in rest)


def _from_json(cls: type, raw: Any) -> Any:
    """A dataclass from a JSON object in either key style; unknown keys are ignored."""
    known = _field_names(cls)
    kwargs = {_snake(k): v for k, v in items(raw) if isinstance(k, str)}
    return cls(**{k: v for k, v in kwargs.items() if k in known})


def _to_json(obj: Any) -> dict[str, Any]:
    """The Java getters' view of a dataclass: camelCase keys, sorted as fastjson writes them."""
    return dict(sorted((_camel(f.name), getattr(obj, f.name)) for f in fields(obj)))


def _topic_json(cfg: Any) -> dict[str, Any]:
    if type(cfg) is TopicConfig:  # the common case written out: _to_json's reflection costs seconds at 50k topics
        out = {"order": cfg.order, "perm": cfg.perm, "readQueueNums": cfg.read_queue_nums,
               "topicFilterType": cfg.topic_filter_type, "topicName": cfg.topic_name,
               "topicSysFlag": cfg.topic_sys_flag, "writeQueueNums": cfg.write_queue_nums}
        return {"autoCreated": True, **out} if cfg.auto_created else out
    out = _to_json(cfg)
    if not out.get("autoCreated"):
        del out["autoCreated"]
    return out


def _counter(raw: Any) -> int:
    """``dataVersion.counter`` (Java) or the bare integer earlier versions wrote."""
    if isinstance(raw, dict):
        return int(raw.get("counter", 0))
    return int(raw or 0)


@dataclass
class TopicConfig:
    """RocketMQ 4.9's ``TopicConfig`` (``topicFilterType`` SINGLE_TAG or MULTI_TAG), plus ``auto_created`` (ours:
    created by a first send under ``autoCreateTopicEnable``), written as ``autoCreated`` only when true so the
    JSON of every other topic keeps RocketMQ's exact field set (Java readers ignore the extra key)."""

    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = DEFAULT_PERM
    order: bool = False
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    auto_created: bool = False

    def wire(self) -> dict[str, int]:
        return {"readQueueNums": self.read_queue_nums, "writeQueueNums": self.write_queue_nums, "perm": self.perm}

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


class TopicConfigManager:
    """The topic table and ``topics.json``.

    Invariants: the table dict and the sorted name list are replaced on every change, never mutated once
    published, so readers on any thread iterate them without a lock; every change steps the DataVersion once
    and ``seq`` once, under the lock, together with the table (a :class:`TopicSnapshot` is consistent).
    ``topics.json`` is written by :class:`~broker_core.server.topics_file.TopicsFileWriter` off the caller's
    thread, coalescing bursts; :meth:`upsert`, :meth:`upsert_many` and :meth:`delete` still return only once
    their change is in a synced file, and :meth:`change` + :meth:`durable` let the event loop wait for that
    without blocking. Crash behaviour: see :mod:`broker_core.server.topics_file`.
    """

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "topics.json"
        self._lock = threading.Lock()
        raw = read_config_file(self.path) or {}
        self.table: dict[str, TopicConfig] = {
            name: _from_json(TopicConfig, cfg) for name, cfg in items(raw.get("topicConfigTable", {}))}
        self._names = sorted(self.table)
        self.seq = 0
        self.data_version = _counter(raw.get("dataVersion"))
        self.data_version_ts = int(raw["dataVersion"].get("timestamp", 0)) \
            if isinstance(raw.get("dataVersion"), dict) else 0
        self.pretty = Fragments(lambda cfg: pretty_entry(cfg, _topic_json))
        self.compact = Fragments(lambda cfg: compact_entry(cfg, _topic_json))
        self.registration_caches: Any = None  # server/registration.py's per-topic lines and last body
        self.writer = TopicsFileWriter(self.path, lambda snap: file_text(snap, self.pretty.join(snap)))
        if not self.path.exists():
            self.writer.wait(self.change({}, ()))

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def snapshot(self) -> TopicSnapshot:
        """The table, its sorted names and DataVersion as one consistent state (a registration carries it)."""
        with self._lock:
            return TopicSnapshot(self.table, self._names, self.data_version, self.data_version_ts, self.seq)

    def change(self, upserts: dict[str, TopicConfig], deletes: Iterable[str]) -> int:
        """Apply in memory (one table copy, one DataVersion step), ask the writer for ``topics.json`` and return
        the change's ``seq`` for :meth:`durable` / :meth:`wait_durable`."""
        with self._lock:
            gone = [n for n in deletes if n in self.table and n not in upserts]
            table = {**self.table, **upserts}
            for name in gone:
                del table[name]
            fresh = sorted(n for n in upserts if n not in self.table)
            names = self._names
            if gone:
                dropped = set(gone)
                names = [n for n in names if n not in dropped]
            if fresh:  # appended or merged (two sorted runs: timsort merges them in linear time)
                names = names + fresh if not names or fresh[0] > names[-1] else sorted(names + fresh)
            self.table, self._names = table, names
            self.seq += 1
            self.data_version += 1
            self.data_version_ts = int(time.time() * 1000)
            snap = TopicSnapshot(table, names, self.data_version, self.data_version_ts, self.seq)
        if gone:
            for cache in (self.pretty, self.compact, *getattr(self.registration_caches, "fragments", ())):
                cache.forget(gone)
        self.writer.submit(snap)
        return snap.seq

    def wait_durable(self, seq: int) -> None:
        self.writer.wait(seq)

    async def durable(self, seq: int) -> None:
        """Wait on the event loop until change ``seq`` is in a synced ``topics.json`` (OSError if its write
        failed)."""
        await self.writer.durable(seq)

    def upsert(self, cfg: TopicConfig) -> TopicConfig | None:
        """Create or replace; returns the previous config once the change is in a synced ``topics.json``."""
        before = self.table.get(cfg.topic_name)
        self.wait_durable(self.change({cfg.topic_name: cfg}, ()))
        return before

    def upsert_many(self, cfgs: list[TopicConfig]) -> None:
        """Create or replace several topics with one table copy, one DataVersion step and one file write
        (RocketMQ 5's ``updateTopicConfigList``)."""
        self.wait_durable(self.change({cfg.topic_name: cfg for cfg in cfgs}, ()))

    def delete(self, topic: str) -> TopicConfig | None:
        before = self.table.get(topic)
        if before is not None:
            self.wait_durable(self.change({}, (topic,)))
        return before

    def wire_table(self) -> dict[str, dict[str, int]]:
        return {name: cfg.wire() for name, cfg in self.table.items()}

    def wrapper(self) -> dict[str, Any]:
        """``TopicConfigSerializeWrapper``: ``{"dataVersion":{...},"topicConfigTable":{name: TopicConfig}}``."""
        snap = self.snapshot()
        return {"dataVersion": {"counter": snap.counter, "timestamp": snap.timestamp},
                "topicConfigTable": {name: _topic_json(snap.table[name]) for name in snap.names}}

    def encode(self, pretty: bool = False) -> str:
        """The wrapper as fastjson writes it: the body of GET_ALL_TOPIC_CONFIG (21) and ``topics.json``; a join
        of cached per-topic entries."""
        snap = self.snapshot()
        if pretty:
            return file_text(snap, self.pretty.join(snap))
        return compact_text(snap, self.compact.join(snap))


class ConsumerOffsetManager:
    """Committed offsets per ``topic@group`` and queue id (the next offset to consume)."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "consumerOffset.json"
        self._lock = threading.Lock()
        raw = read_config_file(self.path) or {}
        self.table: dict[str, dict[int, int]] = {
            key: {int(q): int(o) for q, o in items(queues)} for key, queues in items(raw.get("offsetTable", {}))}
        self.dirty = not self.path.exists()
        self.persist()

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}@{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.table.setdefault(self.key(topic, group), {})[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """-1 when the group never committed on this queue."""
        return self.table.get(self.key(topic, group), {}).get(queue_id, -1)

    def groups_of(self, topic: str) -> list[str]:
        return sorted(k.split("@", 1)[1] for k in self.table if k.split("@", 1)[0] == topic)

    def topics_of(self, group: str) -> list[str]:
        return sorted(k.split("@", 1)[0] for k in self.table if k.split("@", 1)[1] == group)

    def groups(self) -> dict[str, list[str]]:
        """``{group: [topics it committed offsets on]}`` for every group in the table."""
        out: dict[str, list[str]] = {}
        for k in list(self.table):
            topic, group = k.split("@", 1)
            out.setdefault(group, []).append(topic)
        return {g: sorted(t) for g, t in out.items()}

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for k in [k for k in self.table if k.split("@", 1)[0] == topic]:
                del self.table[k]
            self.dirty = True

    def encode(self, pretty: bool = False) -> str:
        """``ConsumerOffsetSerializeWrapper`` (``{"offsetTable":{"T@g":{0:5}}}``, integer keys bare): the body of
        GET_ALL_CONSUMER_OFFSET (43) and ``consumerOffset.json``."""
        with self._lock:
            table = {k: dict(sorted(v.items())) for k, v in sorted(self.table.items())}
        return dumps_fastjson({"offsetTable": table}, pretty)

    def persist(self) -> None:
        with self._lock:
            if not self.dirty:
                return
            self.dirty = False
        write_config_file(self.path, self.encode(pretty=True))


@dataclass
class SubscriptionGroupConfig:
    """RocketMQ 4.9's ``SubscriptionGroupConfig`` with its defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False  # RocketMQ 5's key: a FIFO group for RocketMQ 5 (gRPC) consumers


class SubscriptionGroupManager:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "subscriptionGroup.json"
        self._lock = threading.Lock()
        raw = read_config_file(self.path) or {}
        self.table: dict[str, SubscriptionGroupConfig] = {
            name: _from_json(SubscriptionGroupConfig, cfg)
            for name, cfg in items(raw.get("subscriptionGroupTable", {}))}
        self.data_version = _counter(raw.get("dataVersion"))
        self.data_version_ts = int(raw["dataVersion"].get("timestamp", 0)) \
            if isinstance(raw.get("dataVersion"), dict) else 0
        # each group's text in the file's and the 201 body's form, rendered once per config object (configs are
        # replaced, never mutated): at 10k groups a whole encode cost ~0.3 s on the event loop per console refresh
        self._text: dict[bool, dict[str, tuple[SubscriptionGroupConfig, str]]] = {False: {}, True: {}}
        if not self.path.exists():
            self._persist()

    def get_or_create(self, group: str) -> SubscriptionGroupConfig:
        cfg = self.table.get(group)
        if cfg is None:
            with self._lock:
                cfg = self.table.get(group)
                if cfg is None:
                    cfg = SubscriptionGroupConfig(group)
                    self.table = {**self.table, group: cfg}
                    self._persist()
        return cfg

    def upsert(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        """Create or replace; returns the previous config."""
        with self._lock:
            before = self.table.get(cfg.group_name)
            self.table = {**self.table, cfg.group_name: cfg}
            self._persist()
            return before

    def delete(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            before = self.table.get(group)
            if before is not None:
                self.table = {k: v for k, v in self.table.items() if k != group}
                self._forget([group])
                self._persist()
            return before

    def change(self, upserts: dict[str, SubscriptionGroupConfig], deletes: Iterable[str]) -> None:
        """Create or replace ``upserts`` and delete ``deletes`` with one table copy, one DataVersion step and one
        file write (a slave copying its master's 10k groups: one write, not one per group)."""
        with self._lock:
            gone = [n for n in deletes if n in self.table and n not in upserts]
            if not upserts and not gone:
                return
            table = {**self.table, **upserts}
            for name in gone:
                del table[name]
            self.table = table
            self._forget(gone)
            self._persist()

    def _forget(self, names: list[str]) -> None:
        for cache in self._text.values():
            for name in names:
                cache.pop(name, None)

    def _entry(self, name: str, cfg: SubscriptionGroupConfig, pretty: bool) -> str:
        """``name: config`` as the wrapper's encode writes it, cached while the table holds this config object."""
        cache = self._text[pretty]
        hit = cache.get(name)
        if hit is not None and hit[0] is cfg:
            return hit[1]
        text = pretty_entry_of(name, _to_json(cfg)) if pretty else _encode_str(name) + ":" + dumps_fastjson(
            _to_json(cfg))
        cache[name] = (cfg, text)
        return text

    def wrapper(self) -> dict[str, Any]:
        """``SubscriptionGroupWrapper``: ``{"dataVersion":{...},"subscriptionGroupTable":{name: config}}``."""
        table = self.table
        return {"dataVersion": {"counter": self.data_version, "timestamp": self.data_version_ts},
                "subscriptionGroupTable": {name: _to_json(table[name]) for name in sorted(table)}}

    def encode(self, pretty: bool = False) -> str:
        """The body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and ``subscriptionGroup.json``: exactly
        ``dumps_fastjson(self.wrapper(), pretty)``, joined from the groups' cached text."""
        table, entry = self.table, self._entry
        entries = [entry(name, table[name], pretty) for name in sorted(table)]
        return wrapper_text("subscriptionGroupTable", self.data_version, self.data_version_ts, entries, pretty)

    def _persist(self) -> None:
        self.data_version += 1
        self.data_version_ts = int(time.time() * 1000)
        write_config_file(self.path, self.encode(pretty=True))
