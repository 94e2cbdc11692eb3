"""Shared fixtures: small store configurations in temp dirs, a manual clock, and the suite's one SparkSession."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker_core.client import AdminClient, Producer  # noqa: E402
from broker_core.config import BrokerConfig  # noqa: E402
from broker_core.store import MessageStore  # noqa: E402
from broker_core.store.clock import ManualClock  # noqa: E402

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


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free port, in a temp dir, nothing persisted: one for the whole session (every
    suite that needs Redis shares it, so Celery clients in this process never hold pools to a stopped one)."""
    import redis

    from tests.integration.cluster import free_port, stop_process, wait_until

    tmp = tmp_path_factory.mktemp("redis")
    for _attempt in range(3):  # the free port may be taken between bind and redis' own bind
        port = free_port()
        proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", str(tmp)],
                                stdout=open(tmp / "redis.log", "ab"), stderr=subprocess.STDOUT)
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)

        def up(proc: subprocess.Popen = proc, client: redis.Redis = client) -> bool:  # type: ignore[type-arg]
            if proc.poll() is not None:
                return True
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(up, timeout=30, what="redis-server to answer")
        if proc.poll() is None:
            break
    else:
        raise RuntimeError(f"redis-server did not start: {(tmp / 'redis.log').read_text()[-2000:]}")
    try:
        yield url
    finally:
        client.close()
        stop_process(proc, timeout=30)


@pytest.fixture(scope="module")
def admin(cluster: Any) -> Iterator[AdminClient]:
    """An SDK admin client on the module's (or suite's) ``cluster`` fixture: real name server and brokers."""
    a = AdminClient(cluster.namesrv).start()
    yield a
    a.shutdown()


@pytest.fixture(scope="module")
def producer(cluster: Any) -> Iterator[Producer]:
    """An SDK producer on the module's (or suite's) ``cluster`` fixture."""
    p = Producer("it-producers", cluster.namesrv).start()
    yield p
    p.shutdown()
