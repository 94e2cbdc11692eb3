"""The health report: the web app, the database and every broker the name server lists."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connection

from broker_core.client import ClientError
from console import broker_client

UNREACHABLE = (ClientError, ConnectionError, TimeoutError)


def database_status() -> str:
    """``"ok"`` or the database error."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"error: {exc}"
    return "ok"


def broker_statuses() -> dict[str, str]:
    """``{broker name: "ok" | "error: ..."}``; ``{"namesrv": "error: ..."}`` when the name server is down."""
    admin = broker_client.admin()
    try:
        info = admin.cluster_info()
    except UNREACHABLE as exc:
        return {"namesrv": f"error: {exc}"}
    out = {}
    for name, data in sorted(info.get("brokerAddrTable", {}).items()):
        addr = data.get("brokerAddrs", {}).get("0")
        if addr is None:
            out[name] = "error: no master address"
            continue
        try:
            admin.broker_runtime(addr)
            out[name] = "ok"
        except UNREACHABLE as exc:
            out[name] = f"error: {exc}"
    return out


def health() -> tuple[dict[str, Any], bool]:
    """The report and whether everything is ok (no brokers at all counts as not ok)."""
    report: dict[str, Any] = {"web": "ok", "database": database_status(), "brokers": broker_statuses()}
    brokers = report["brokers"]
    healthy = report["database"] == "ok" and bool(brokers) and all(v == "ok" for v in brokers.values())
    return report, healthy
