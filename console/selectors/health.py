"""The health report: the web app, the database, Redis (Celery's broker), every broker group the name server
lists (its master) and, where a group has slaves, each slave with its replication lag."""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, connection

from console.selectors.replication import UNREACHABLE, broker_groups


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


def broker_statuses() -> tuple[dict[str, str], dict[str, Any]]:
    """``{broker name: "ok" | "error: ..."}`` of each group's master (``{"namesrv": "error: ..."}`` when the name
    server is down), and per group with slaves (or HA connections): ``{"master": status, "slaves": {broker id:
    {"addr", "status", "connected", "lag_bytes", "lag_seconds"}}, "worst_lag_bytes", "worst_lag_seconds"}``."""
    try:
        groups = broker_groups()
    except UNREACHABLE as exc:
        return {"namesrv": f"error: {exc}"}, {}
    masters, replication = {}, {}
    for g in groups:
        master = g["master"]
        masters[g["name"]] = "error: no master address" if master["addr"] is None else master["status"]
        if g["slaves"] or g["connections"]:
            replication[g["name"]] = {
                "master": masters[g["name"]],
                "slaves": {str(s["broker_id"]): {k: s[k] for k in ("addr", "status", "connected", "lag_bytes",
                                                                  "lag_seconds")} for s in g["slaves"]},
                "worst_lag_bytes": g["worst_lag_bytes"], "worst_lag_seconds": g["worst_lag_seconds"]}
    return masters, replication


def health() -> tuple[dict[str, Any], bool]:
    """The report and whether the console can serve (database and every broker ok; no brokers at all counts as
    not ok). Redis is reported but does not make the console unhealthy: without it scheduled jobs, "run now"
    and Spark jobs wait, while pages, produce, consume and lookups keep working. Slaves are reported under
    ``replication`` (only when some group has one) and do not make the console unhealthy either: a group whose
    master answers serves reads and writes without them."""
    masters, replication = broker_statuses()
    report: dict[str, Any] = {"web": "ok", "database": database_status(), "redis": redis_status(),
                              "brokers": masters}
    if replication:
        report["replication"] = replication
    brokers = report["brokers"]
    healthy = report["database"] == "ok" and bool(brokers) and all(v == "ok" for v in brokers.values())
    return report, healthy
