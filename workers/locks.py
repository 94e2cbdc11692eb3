"""One lock per (job, broker) in the Redis that Celery uses, so overlapping beats or workers never run the
same job on the same broker twice at once.

A lock expires after its timeout even if its holder died (a killed worker does not block the job forever);
the timeout is longer than any run should take. A run that cannot take the lock at once is skipped, not
queued: the next beat tick runs it again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from redis.exceptions import LockError

KEY_PREFIX = "broker_core:job-lock"
DEFAULT_TIMEOUT_S = 300.0

_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def redis_client() -> redis.Redis:
    """A client of Celery's Redis (``settings.CELERY_BROKER_URL``), one per URL and process."""
    url = str(settings.CELERY_BROKER_URL)
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = redis.Redis.from_url(url)
        return client


def lock_name(job: str, broker: str) -> str:
    return f"{KEY_PREFIX}:{job}:{broker or '*'}"


@contextmanager
def job_lock(job: str, broker: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[bool]:
    """Hold the lock of ``job`` on ``broker`` for the block; yields False (and holds nothing) when another
    run holds it."""
    lock = redis_client().lock(lock_name(job, broker), timeout=timeout_s, blocking=False)
    if not lock.acquire(blocking=False):
        yield False
        return
    try:
        yield True
    finally:
        try:
            lock.release()
        except LockError:  # expired while we ran (a run longer than the timeout): nothing left to release
            pass
