"""What the brokers and name servers said, kept a few seconds so list pages and list endpoints at 50k topics and
10k groups cost one cached lookup per view instead of a whole-cluster fan-out.

One :class:`BrokerCache` per kind of answer (the topic index, the group index); each holds one entry per admin
client (``broker_client.admin()``: a new name server address, ACL account or installed stand-in is a new
client, so it never sees another's entries).

Invariants:

1. An entry younger than ``CONSOLE_BROKER_CACHE_S`` seconds (setting; default :data:`DEFAULT_TTL_S`) is served
   as it is.
2. An older entry is checked with ``version(admin)`` when the cache has one (a cheap question, e.g. the name
   server's topic-config DataVersion of every broker): an equal answer renews the entry without rebuilding it;
   a different one rebuilds it in the request. The version is taken *before* the data, so an entry's data is
   never older than its version says.
3. Without ``version``, an entry up to twice the TTL old is served while one background thread rebuilds it
   (never more than one per cache and client); older than that it is rebuilt in the request.
4. :func:`invalidate_all` (the console's own writes: topic created, updated or deleted, offsets reset, messages
   acked) expires every entry: the next read checks the version in the request (the brokers registered the
   change before they answered the write, so a changed topic is seen) or, without a version, rebuilds in the
   request. This process sees its own changes at once; other console processes per (1)-(3).
5. A failed rebuild (broker or name server unreachable) raises to the caller and keeps no entry of it; a failed
   background rebuild leaves the stale entry, which (3) retires after twice the TTL.

TTL 0 (the test suites set it) rebuilds or version-checks on every read.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import connections

from console import broker_client

DEFAULT_TTL_S = 5.0
T = TypeVar("T")


def ttl_s() -> float:
    """``CONSOLE_BROKER_CACHE_S`` (seconds an answer is reused before it is checked again)."""
    return float(getattr(settings, "CONSOLE_BROKER_CACHE_S", DEFAULT_TTL_S))


@dataclass
class _Entry(Generic[T]):
    value: T
    version: object
    checked: float  # time.monotonic() of the last build or version check
    generation: int  # _generation when built; an older one is invalid (invalidate_all)


_generation = 0


class BrokerCache(Generic[T]):
    """``build(admin) -> T``, cached per admin client (see the module's invariants)."""

    def __init__(self, name: str, build: Callable[[Any], T], version: Callable[[Any], object] | None = None) -> None:
        self.name = name
        self._build = build
        self._version = version
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._entries: weakref.WeakKeyDictionary[Any, _Entry[T]] = weakref.WeakKeyDictionary()
        self._refreshing: weakref.WeakSet[Any] = weakref.WeakSet()

    def get(self) -> T:
        admin = broker_client.admin()
        now = time.monotonic()
        ttl = ttl_s()
        with self._lock:
            entry = self._entries.get(admin)
        if entry is not None and entry.generation == _generation:
            age = now - entry.checked
            if age < ttl:
                return entry.value
            if self._version is None and age < 2 * ttl:
                self._refresh_in_background(admin)
                return entry.value
        return self._rebuild(admin, entry)

    def _rebuild(self, admin: Any, entry: _Entry[T] | None) -> T:
        with self._build_lock:  # one rebuild at a time: requests arriving meanwhile take its result
            with self._lock:
                latest = self._entries.get(admin)
            if (latest is not None and latest is not entry and latest.generation == _generation
                    and time.monotonic() - latest.checked < ttl_s()):
                return latest.value
            return self._rebuild_now(admin, latest if latest is not None else entry)

    def _rebuild_now(self, admin: Any, entry: _Entry[T] | None) -> T:
        generation = _generation
        version = self._version(admin) if self._version is not None else None
        if entry is not None and self._version is not None and version == entry.version:
            renewed = _Entry(entry.value, version, time.monotonic(), generation)
        else:
            renewed = _Entry(self._build(admin), version, time.monotonic(), generation)
        with self._lock:
            self._entries[admin] = renewed
        return renewed.value

    def _refresh_in_background(self, admin: Any) -> None:
        with self._lock:
            if admin in self._refreshing:
                return
            self._refreshing.add(admin)

        def run() -> None:
            try:
                self._rebuild(admin, None)
            except Exception:  # noqa: BLE001 - read-only; the stale entry stays until it is twice the TTL old
                pass
            finally:
                connections.close_all()  # this thread's database connections (the group index reads the audit)
                with self._lock:
                    self._refreshing.discard(admin)

        threading.Thread(target=run, name=f"console-cache-{self.name}", daemon=True).start()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def invalidate_all() -> None:
    """Every cache rebuilds on its next read (after this process changed topics, groups or offsets)."""
    global _generation
    _generation += 1
