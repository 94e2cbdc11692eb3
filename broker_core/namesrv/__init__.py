"""The name server: route tables, broker registration and heartbeat expiry (upstream NameServer).

Stateless by design (seeds section 14): brokers register with every name server every 30 s and are dropped
after 120 s without a heartbeat; clients pull routes, nothing is pushed. Run it with
``python -m broker_core.namesrv --listen HOST:PORT``.
"""

from broker_core.namesrv.route_info import (
    DEFAULT_PERM,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    QueueData,
    RouteInfoManager,
)
from broker_core.namesrv.server import NamesrvController

__all__ = [
    "DEFAULT_PERM",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "BrokerData",
    "NamesrvController",
    "QueueData",
    "RouteInfoManager",
]
