"""KVConfigManager: the name server's namespaced key/value settings (upstream ``KVConfigManager``), e.g.
namespace ``ORDER_TOPIC_CONFIG``: topic -> ``"broker-a:4;broker-b:4"``.

Thread-safe; kept in memory, and when a path is given written after every change as RocketMQ's
``kvConfig.json`` (``{"configTable":{namespace:{key:value}}}``, ``.tmp``/``.bak``) and read back at start.
"""

from __future__ import annotations

import threading
from pathlib import Path

from broker_core.codec.config_file import read_config_file, write_config_file
from broker_core.codec.fastjson import dumps_fastjson, items

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.table: dict[str, dict[str, str]] = {}
        raw = read_config_file(path) if path is not None else None
        if isinstance(raw, dict):
            self.table = {str(ns): {str(k): str(v) for k, v in items(kv)}
                          for ns, kv in items(raw.get("configTable", {}))}

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self.table.setdefault(namespace, {})[key] = value
            self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            kv = self.table.get(namespace)
            if kv is not None and kv.pop(key, None) is not None:
                self._persist()  # an emptied namespace stays (GET_KVLIST answers {"table":{}}), as upstream

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace; None when it was never written (one whose keys were all deleted is ``{}``)."""
        with self._lock:
            kv = self.table.get(namespace)
            return dict(kv) if kv is not None else None

    def _persist(self) -> None:
        if self.path is not None:
            write_config_file(self.path, dumps_fastjson({"configTable": self.table}, pretty=True))
