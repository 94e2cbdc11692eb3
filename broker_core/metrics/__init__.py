"""Prometheus metrics for the processes (broker, name server, controller, Celery workers): RocketMQ 5's names and
labels (``rocketmq_*``), served in Prometheus' text format by ``prometheus_client`` on a port of their own
(``metricsExporterType=PROM``, ``metricsPromExporterHost``, ``metricsPromExporterPort``).

What the hot path pays: nothing locked. Counters live in plain dicts owned by the thread that bumps them
(:class:`Tally`, one table per thread, registered once); a scrape sums the tables (:meth:`Tally.snapshot`, dict
copies, atomic under the GIL). Everything else is read from the process' own state when Prometheus scrapes, by a
custom collector (``prometheus_client.registry.Collector``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

PROM = "PROM"


def prom_enabled(exporter_type: object) -> bool:
    """``metricsExporterType`` names PROM (by name or by its number, 2, as RocketMQ accepts)."""
    return str(exporter_type).strip().upper() in (PROM, "2")


def parse_labels(text: str) -> dict[str, str]:
    """``metricsLabel``: ``k:v,k:v`` pairs added to every series; malformed pairs are skipped (RocketMQ)."""
    out = {}
    for pair in (text or "").split(","):
        key, sep, value = pair.partition(":")
        if sep and key.strip() and value.strip():
            out[key.strip()] = value.strip()
    return out


class Tally:
    """Counters per thread, summed at scrape. ``table()`` is the calling thread's ``{key: [numbers]}`` (created
    and registered on its first use, under a lock taken once per thread); the owner thread alone writes it."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._local = threading.local()
        self._tables: list[dict[Any, list[int]]] = []
        self._lock = threading.Lock()

    def table(self) -> dict[Any, list[int]]:
        t: dict[Any, list[int]] | None = getattr(self._local, "t", None)
        if t is None:
            t = self._local.t = {}
            with self._lock:
                self._tables.append(t)
        return t

    def snapshot(self) -> dict[Any, list[int]]:
        """The sum over every thread's table (a copy; the owners keep counting meanwhile)."""
        with self._lock:
            tables = list(self._tables)
        total: dict[Any, list[int]] = {}
        for t in tables:
            for key, row in t.copy().items():
                acc = total.get(key)
                if acc is None:
                    total[key] = list(row)
                else:
                    for i, v in enumerate(row):
                        acc[i] += v
        return total


class FunctionCollector(Collector):
    """A collector whose ``collect`` is a function (the process' own view of its state)."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        yield from self._collect()


class Exporter:
    """The HTTP endpoint (``/metrics`` and ``/``) of one registry, on ``host:port`` (port 0: a free one)."""

    def __init__(self, collect: Callable[[], Iterable[Metric]], host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(FunctionCollector(collect))
        self.server, self.thread = start_http_server(port, addr=host or "0.0.0.0", registry=self.registry)
        self.port = int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
