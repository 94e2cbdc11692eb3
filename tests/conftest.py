"""Shared fixtures: small store configurations in temp dirs, a manual clock, and the suite's one SparkSession."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker_core.config import BrokerConfig  # noqa: E402
from broker_core.store import MessageStore  # noqa: E402
from broker_core.store.clock import ManualClock  # noqa: E402

GOLDEN = ROOT / "tests" / "golden"


def small_config(store_dir: Path, **overrides: object) -> BrokerConfig:
    """A config with tiny files so tests roll segments, queue files and index files quickly."""
    cfg = BrokerConfig().with_store_dir(store_dir)
    cfg.mapped_file_size_commit_log_bytes = 64 * 1024
    cfg.mapped_file_size_consume_queue_bytes = 20 * 50
    cfg.max_hash_slot_num = 64
    cfg.max_index_num = 200
    cfg.clean_resource_interval_ms = 0
    cfg.warm_mapped_file_enable = False
    cfg.delete_commit_log_files_interval_ms = 0
    for name, value in overrides.items():
        setattr(cfg, name, value)
    return cfg.validate()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_store(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., MessageStore]]:
    """Factory: ``open_store(background=False, **config_overrides)`` -> started store, shut down after."""
    opened: list[MessageStore] = []

    def factory(background: bool = False, disk_probe=None, store_dir: Path | None = None, **overrides: object):  # type: ignore[no-untyped-def]
        cfg = small_config(store_dir or tmp_path / "store", **overrides)
        store = MessageStore(cfg, clock, disk_probe, background=background).start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.shutdown()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every Spark test (starting one takes seconds): local[2], no UI, few partitions.
    pyspark is imported only here, when a test asks for the session, so the unit suite runs without it."""
    pytest.importorskip("pyspark")
    from spark_jobs.session import build_session

    session = build_session("broker_core-tests", master="local[2]", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g",
        "spark.python.worker.reuse": "true"}, ship_code=True)
    yield session
    session.stop()
