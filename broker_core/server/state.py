"""Broker state persisted under ``config/``: topic configs (``topics.json``), consumer offsets
(``consumerOffset.json``) and subscription groups (``subscriptionGroup.json``).

Each manager is thread-safe, keeps its state in memory, and writes its file atomically when asked
(``persist``); topics and groups persist on every change, offsets on a timer and at shutdown.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from broker_core.server.json_file import read_json, write_json_atomic

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
DEFAULT_PERM = PERM_READ | PERM_WRITE


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = DEFAULT_PERM
    order: bool = False

    def wire(self) -> dict[str, int]:
        return {"readQueueNums": self.read_queue_nums, "writeQueueNums": self.write_queue_nums, "perm": self.perm}

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


class TopicConfigManager:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "topics.json"
        self._lock = threading.Lock()
        raw = read_json(self.path, {"topicConfigTable": {}})
        self.table: dict[str, TopicConfig] = {
            name: TopicConfig(**cfg) for name, cfg in raw.get("topicConfigTable", {}).items()}
        self.data_version = int(raw.get("dataVersion", 0))
        if not self.path.exists():
            self._persist()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def upsert(self, cfg: TopicConfig) -> TopicConfig | None:
        """Create or replace; returns the previous config."""
        with self._lock:
            before = self.table.get(cfg.topic_name)
            self.table = {**self.table, cfg.topic_name: cfg}
            self._persist()
            return before

    def delete(self, topic: str) -> TopicConfig | None:
        with self._lock:
            before = self.table.get(topic)
            if before is not None:
                self.table = {k: v for k, v in self.table.items() if k != topic}
                self._persist()
            return before

    def wire_table(self) -> dict[str, dict[str, int]]:
        return {name: cfg.wire() for name, cfg in self.table.items()}

    def _persist(self) -> None:
        self.data_version += 1
        write_json_atomic(self.path, {"dataVersion": self.data_version,
                                      "topicConfigTable": {k: asdict(v) for k, v in self.table.items()}})


class ConsumerOffsetManager:
    """Committed offsets per ``topic@group`` and queue id (the next offset to consume)."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "consumerOffset.json"
        self._lock = threading.Lock()
        raw = read_json(self.path, {"offsetTable": {}})
        self.table: dict[str, dict[int, int]] = {
            key: {int(q): int(o) for q, o in queues.items()} for key, queues in raw.get("offsetTable", {}).items()}
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

    def persist(self) -> None:
        with self._lock:
            if not self.dirty:
                return
            data = {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}}
            self.dirty = False
        write_json_atomic(self.path, data)


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16


class SubscriptionGroupManager:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "subscriptionGroup.json"
        self._lock = threading.Lock()
        raw = read_json(self.path, {"subscriptionGroupTable": {}})
        self.table: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(**cfg) for name, cfg in raw.get("subscriptionGroupTable", {}).items()}
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

    def _persist(self) -> None:
        write_json_atomic(self.path, {"subscriptionGroupTable": {k: asdict(v) for k, v in self.table.items()}})
