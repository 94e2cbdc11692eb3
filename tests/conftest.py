"""Shared names (ROOT, GOLDEN, small_config), the integration marker for process suites, and the fixture plugins
(tests/plugins: stores, brokers, redis, spark)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker_core.config import BrokerConfig  # noqa: E402

GOLDEN = ROOT / "tests" / "golden"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


# Suites that start real processes (brokers, name servers, Redis, Celery, Spark, Chromium, third-party clients):
# every test in them is marked ``integration``, so ``make test-fast`` (``pytest -m "not integration"``) runs the
# in-process unit loop alone.
PROCESS_SUITES = frozenset({"integration", "compat", "console", "e2e", "workers", "spark"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.relative_to(ROOT / "tests").parts
        if parts and parts[0] in PROCESS_SUITES:
            item.add_marker(pytest.mark.integration)


def small_config(store_dir: Path, **overrides: object) -> BrokerConfig:
    """A config with tiny files so tests roll segments, queue files and index files quickly."""
    cfg = BrokerConfig().with_store_dir(store_dir)
    cfg.store.mapped_file_size_commit_log_bytes = 64 * 1024
    cfg.store.mapped_file_size_consume_queue_bytes = 20 * 50
    cfg.store.max_hash_slot_num = 64
    cfg.store.max_index_num = 200
    cfg.retention.clean_resource_interval_ms = 0
    cfg.store.warm_mapped_file_enable = False
    cfg.retention.delete_commit_log_files_interval_ms = 0
    for name, value in overrides.items():
        cfg.set_field(name, value)  # by field name, in whichever section
    return cfg.validate()


pytest_plugins = ["tests.plugins.stores", "tests.plugins.brokers", "tests.plugins.redis", "tests.plugins.spark"]
