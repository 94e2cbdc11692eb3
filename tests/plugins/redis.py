"""A real redis-server for the whole session."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import REDIS_SERVER


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
