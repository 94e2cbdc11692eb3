"""Workers tests: a real redis-server, a real name server and brokers (subprocesses on free ports), and for
the process tests a real ``celery worker`` subprocess with its own SQLite file database.

Django is configured here as in the console tests; the in-process tests use pytest-django's test database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("DJANGO_DB_PATH", str(Path(tempfile.mkdtemp(prefix="console-db-")) / "console.sqlite3"))

import django

django.setup()

import pytest  # noqa: E402
from celery import Celery  # noqa: E402

from broker_core.client import AdminClient, Producer  # noqa: E402
from console import broker_client  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.integration.cluster import Cluster, stop_process, wait_until  # noqa: E402 - re-exported

CELERY = str(Path(sys.executable).parent / "celery")
LEVELS_MS = [100 * (i + 1) for i in range(18)]
# Fast delay levels, and no delay-level tick of the broker's own: only the deliver task delivers.
DELAY_CONF = "messageDelayLevel=" + " ".join(f"{ms}ms" for ms in LEVELS_MS) + "\nscheduleDeliverIntervalMs=0\n"
# Retention decided by the task alone (no built-in cleaner), every hour a deleteWhen hour, nothing reserved,
# and 64 KiB CommitLog segments so a few hundred KiB make several segments.
RETENTION_CONF = ("mapedFileSizeCommitLog=65536\ncleanResourceInterval=0\nfileReservedTime=0\n"
                  "deleteCommitLogFilesInterval=0\ndeleteWhen=" + ";".join(f"{h:02d}" for h in range(24)) + "\n")
_names = count()



@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server, ``broker-a`` (delivered only when asked) and ``broker-r`` (retention by the task)."""
    c = Cluster(tmp_path_factory.mktemp("workers-cluster"))
    try:
        yield c.add_brokers_registered({"broker-a": DELAY_CONF, "broker-r": RETENTION_CONF})
    finally:
        broker_client.reset()
        c.close()


@pytest.fixture(scope="session")
def sdk_admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.namesrv) as admin:
        yield admin


@pytest.fixture(scope="session")
def producer(cluster: Cluster) -> Iterator[Producer]:
    p = Producer("workers-test-producers", cluster.namesrv).start()
    yield p
    p.shutdown()


@pytest.fixture
def unique() -> Callable[[str], str]:
    return lambda prefix: f"{prefix}-{os.getpid()}-{next(_names)}"


def make_topic(admin: AdminClient, name: str, broker: str, queues: int = 1) -> str:
    admin.create_topic(name, queues, queues, brokers=[broker])
    wait_until(lambda: name in admin.topic_list(), timeout=30, what=f"route of {name}")
    return name


@pytest.fixture(autouse=True)
def _workers_env(db: None, settings, cluster: Cluster, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """Every test has database access, the console's clients on the test cluster, and Celery's Redis."""
    settings.BROKER_CORE_NAMESRV = cluster.namesrv
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = redis_url


def worker_env(redis_url: str, namesrv: str, db_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELERY_") and k != "DATABASE_URL"}
    return {**env, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "console.settings", "REDIS_URL": redis_url,
            "BROKER_CORE_NAMESRV": namesrv, "DJANGO_DB_PATH": str(db_path)}


def manage(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@contextmanager
def celery_worker(env: dict[str, str], log_path: Path, hostname: str, app: Celery,
                  queues: str | None = None) -> Iterator[subprocess.Popen]:  # type: ignore[type-arg]
    """A real ``celery worker`` subprocess (solo pool, no gossip/mingle, named ``hostname``, consuming ``queues``
    if given, else the default queue) logging to ``log_path``; yielded once ``app`` reaches it by ping, stopped
    on exit."""
    queue_args = ["-Q", queues] if queues else []
    proc = subprocess.Popen([CELERY, "-A", "workers.celery", "worker", *queue_args, "--pool=solo", "-n", hostname,
                             "--without-gossip", "--without-mingle", "-l", "info"],
                            cwd=ROOT, env=env, stdout=open(log_path, "ab"), stderr=subprocess.STDOUT)
    # app.conf.update(broker_url=...) does not reach the connection and producer pools this process already made
    # (each test module that imports redis_url gets its own redis-server): drop them so the ping goes to the
    # Redis the worker uses, not the previous one.
    app._pool = None
    app.amqp._producer_pool = None
    try:
        wait_until(lambda: proc.poll() is not None or bool(app.control.ping(destination=[hostname], timeout=2.0)),
                   timeout=120, what=f"the worker {hostname} to answer pings")
        assert proc.poll() is None, log_path.read_text()[-3000:]
        yield proc
    finally:
        stop_process(proc)


@contextmanager
def spark_results_worker(tmp: Path, redis_url: str, namesrv: str, results_uri: str, app: Celery,
                         **extra_env: str) -> Iterator[dict[str, str]]:
    """A real ``celery worker -Q spark`` (its own migrated SQLite file under ``tmp``) whose results URI is
    ``results_uri``: the worker that answers the console's ``workers.spark_results_*`` reads. Yields its env."""
    env = {**worker_env(redis_url, namesrv, tmp / "spark-worker.sqlite3"), "SPARK_RESULTS_URI": results_uri,
           "SPARK_MASTER": "local[1]", "SPARK_CONF_UI": "spark.ui.enabled=false", "SPARK_DRIVER_MEMORY": "512m",
           **extra_env}
    manage(env, "migrate", "--noinput")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    with celery_worker(env, tmp / "spark-worker.log", f"spark-results-{tmp.name}@localhost", app, queues="spark"):
        yield env


def wait_flushed(sdk_admin: AdminClient, cluster: Cluster, broker: str) -> None:
    """Until ``broker`` has flushed its CommitLog: a segment the flush thread is syncing is held, and retention
    stops at the first held segment (upstream's rule), so a test expecting deletions waits for the flush first."""
    addr = cluster.brokers[broker].addr
    wait_until(lambda: sdk_admin.broker_runtime(addr)["flush_lag_bytes"] == 0, timeout=30,
               what=f"{broker}'s CommitLog to be flushed")
