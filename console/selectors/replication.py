"""Reads of master/slave replication: each broker group (a broker name) with its master and slaves, and each
slave's replication lag in bytes and in seconds.

Where the figures come from (each broker's runtime info, GET_BROKER_RUNTIME_INFO):

- the master (brokerId 0) lists its HA connections in ``haSlaves``: per connection the slave's acknowledged
  offset (``ackOffset``), ``lagBytes`` (its CommitLog end minus that) and ``lagSeconds`` (how long the slave
  has been behind);
- a slave (brokerId above 0) reports its CommitLog end (``commitLogMaxOffset``), whether it is connected
  (``haConnected``) and its lag against the master's offset as it last heard it (``haSlaveLagBytes``).

An HA connection names the slave's socket (``host:ephemeral port``), not its broker address, so a registered
slave is matched to a connection on the same host with the nearest acknowledged offset (a slave that does not
answer takes a remaining connection of its host). A slave's lag is the matched connection's (the master's
view, as RocketMQ's); else, both answering, the master's CommitLog end minus the slave's; else, with the
master down, the slave's own last-heard figure. ``None`` means unknown. A connection no registered slave
matches is still listed (``connections``) and counts in ``worst_lag_bytes``.
"""

from __future__ import annotations

import json
from typing import Any

from broker_core.client import ClientError
from console import broker_client

UNREACHABLE = (ClientError, ConnectionError, TimeoutError)


def _runtime(admin: Any, addr: str) -> tuple[dict[str, Any] | None, str]:
    """The broker's runtime info and ``"ok"``, or None and ``"error: ..."``."""
    try:
        return admin.broker_runtime(addr), "ok"
    except UNREACHABLE as exc:
        return None, f"error: {exc}"


def _int(value: Any, default: int | None = None) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _connections(runtime: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The master's ``haSlaves`` as ``[{"remote", "ack_offset", "lag_bytes", "lag_seconds"}]``."""
    if runtime is None:
        return []
    try:
        raw = json.loads(str(runtime.get("haSlaves") or "[]"))
    except ValueError:
        return []
    return [{"remote": str(c.get("remote", "")), "ack_offset": _int(c.get("ackOffset"), -1),
             "lag_bytes": _int(c.get("lagBytes")), "lag_seconds": c.get("lagSeconds")}
            for c in raw if isinstance(c, dict)]


def _host(addr: str) -> str:
    return addr.rsplit(":", 1)[0]


def _match(slaves: list[dict[str, Any]], connections: list[dict[str, Any]]) -> None:
    """Give each slave row its HA connection (``row["connection"]``), see the module docstring."""
    free = list(connections)
    for row in sorted(slaves, key=lambda r: r["offset"] is None):  # answering slaves choose first
        same_host = [c for c in free if _host(c["remote"]) == _host(row["addr"])]
        if not same_host:
            continue
        if row["offset"] is not None:
            best = min(same_host, key=lambda c: abs(c["ack_offset"] - row["offset"]))
        else:
            best = same_host[0]
        free.remove(best)
        row["connection"] = best


def _slave_lag(row: dict[str, Any], master_end: int | None, runtime: dict[str, Any] | None) -> None:
    conn = row.pop("connection", None)
    if conn is not None:
        row.update(lag_bytes=conn["lag_bytes"], lag_seconds=conn["lag_seconds"], lag_source="master")
    elif master_end is not None and row["offset"] is not None:
        row.update(lag_bytes=max(0, master_end - row["offset"]), lag_source="offsets")
    elif runtime is not None:
        own = _int(runtime.get("haSlaveLagBytes"))
        if own is not None and own >= 0:  # -1: the slave never heard from a master
            row.update(lag_bytes=own, lag_source="slave (last heard from the master)")


def broker_group(name: str, cluster: str, addrs: dict[str, str]) -> dict[str, Any]:
    """One group from the name server's ``brokerAddrs`` (``{broker id: addr}``); see :func:`broker_groups`."""
    admin = broker_client.admin()
    master_addr = addrs.get("0")
    master: dict[str, Any] = {"broker_id": 0, "addr": master_addr, "up": False, "status": "no master registered",
                              "role": None, "offset": None}
    master_rt = None
    if master_addr is not None:
        master_rt, master["status"] = _runtime(admin, master_addr)
        if master_rt is not None:
            master.update(up=True, role=master_rt.get("role"), offset=_int(master_rt.get("commitLogMaxOffset")))
    connections = _connections(master_rt)
    slaves: list[dict[str, Any]] = []
    runtimes: dict[int, dict[str, Any] | None] = {}
    for broker_id, addr in sorted(((int(i), a) for i, a in addrs.items() if i != "0")):
        rt, status = _runtime(admin, addr)
        runtimes[broker_id] = rt
        slaves.append({"broker_id": broker_id, "addr": addr, "up": rt is not None, "status": status,
                       "role": rt.get("role") if rt else None,
                       "offset": _int(rt.get("commitLogMaxOffset")) if rt else None,
                       "connected": bool(rt.get("haConnected")) if rt else None,
                       "lag_bytes": None, "lag_seconds": None, "lag_source": None})
    _match(slaves, connections)
    for row in slaves:
        _slave_lag(row, master["offset"], runtimes[row["broker_id"]])
    lags = [r["lag_bytes"] for r in slaves if r["lag_bytes"] is not None]
    lags += [c["lag_bytes"] for c in connections if c["lag_bytes"] is not None]
    seconds = [float(r["lag_seconds"]) for r in slaves if r["lag_seconds"] is not None]
    seconds += [float(c["lag_seconds"]) for c in connections if c["lag_seconds"] is not None]
    return {"name": name, "cluster": cluster, "master": master, "slaves": slaves, "connections": connections,
            "worst_lag_bytes": max(lags) if lags else None, "worst_lag_seconds": max(seconds) if seconds else None}


def broker_groups() -> list[dict[str, Any]]:
    """Every broker group the name server lists, sorted by name: ``{"name", "cluster", "master": {"broker_id",
    "addr", "up", "status", "role", "offset"}, "slaves": [{"broker_id", "addr", "up", "status", "role",
    "offset", "connected", "lag_bytes", "lag_seconds", "lag_source"}], "connections": the master's HA
    connections, "worst_lag_bytes", "worst_lag_seconds"}``. Raises when the name server cannot be reached."""
    info = broker_client.admin().cluster_info()
    cluster_of = {b: c for c, names in info.get("clusterAddrTable", {}).items() for b in names}
    return [broker_group(name, cluster_of.get(name, data.get("cluster", "-")), data.get("brokerAddrs", {}))
            for name, data in sorted(info.get("brokerAddrTable", {}).items())]
