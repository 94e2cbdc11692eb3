"""One broker's runtime statistics as GET_BROKER_RUNTIME_INFO (28) reports them, every key (what ``mqadmin
brokerStatus`` prints and rocketmq-dashboard's broker status shows), for a broker the name server lists."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.errors import not_found


def known_brokers() -> dict[str, tuple[str, str]]:
    """``{address: (brokerName, brokerId)}`` of every broker the name server lists."""
    info = broker_client.admin().cluster_info()
    return {str(addr): (name, str(bid)) for name, data in info.get("brokerAddrTable", {}).items()
            for bid, addr in data.get("brokerAddrs", {}).items()}


def broker_runtime(addr: str) -> dict[str, Any]:
    """``{"addr", "broker_name", "broker_id", "rows": [(key, value)] sorted by key}``; 404 for an address the name
    server does not list (the console asks only brokers of its cluster)."""
    known = known_brokers()
    if addr not in known:
        raise not_found(f"no broker at {addr} in the name server's cluster table")
    table = broker_client.admin().broker_runtime(addr)
    name, bid = known[addr]
    return {"addr": addr, "broker_name": name, "broker_id": bid, "rows": sorted(table.items()), "runtime": table}
