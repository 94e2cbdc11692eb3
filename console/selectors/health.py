"""The health report: the web app, the database, Redis (Celery's broker) and every broker the name server
lists."""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
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


def redis_status() -> str:
    """``"ok"`` or why Redis (``CELERY_BROKER_URL``) does not answer a PING within a second."""
    client = redis.Redis.from_url(str(settings.CELERY_BROKER_URL), socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"error: {exc}"
    finally:
        client.close()
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
    """The report and whether the console can serve (database and every broker ok; no brokers at all counts as
    not ok). Redis is reported but does not make the console unhealthy: without it scheduled jobs, "run now"
    and Spark jobs wait, while pages, produce, consume and lookups keep working."""
    report: dict[str, Any] = {"web": "ok", "database": database_status(), "redis": redis_status(),
                              "brokers": broker_statuses()}
    brokers = report["brokers"]
    healthy = report["database"] == "ok" and bool(brokers) and all(v == "ok" for v in brokers.values())
    return report, healthy
