"""Reads for the dashboard page: every broker the name server lists, with address and health, and topic totals."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.selectors.replication import UNREACHABLE
from console.selectors.topics import TOPIC_TYPES, topic_type_counts

# Runtime keys worth a column when the broker reports them.
RUNTIME_KEYS = ("version", "brokerRole", "putTps", "getTps", "diskRatio")


def brokers() -> list[dict[str, Any]]:
    """``[{"name", "addr", "healthy", "status", "runtime"}]`` sorted by name. Raises when the name server is
    unreachable (the page shows that as a 503 banner); a broker that does not answer is ``healthy=False``."""
    admin = broker_client.admin()
    info = admin.cluster_info()
    rows = []
    for name, data in sorted(info.get("brokerAddrTable", {}).items()):
        addr = data.get("brokerAddrs", {}).get("0")
        row: dict[str, Any] = {"name": name, "addr": addr or "-", "healthy": False, "status": "no master address",
                               "runtime": {}}
        if addr is not None:
            try:
                runtime = admin.broker_runtime(addr)
            except UNREACHABLE as exc:
                row["status"] = f"error: {exc}"
            else:
                row.update(healthy=True, status="ok",
                           runtime={k: runtime[k] for k in RUNTIME_KEYS if k in runtime})
        rows.append(row)
    return rows


def topic_totals() -> dict[str, int]:
    """Topic counts per type and ``total``."""
    counts = topic_type_counts()  # the cached topic index's, no row per topic
    return {"total": sum(counts.values()), **{kind: counts.get(kind, 0) for kind in TOPIC_TYPES}}
