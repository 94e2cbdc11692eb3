"""RouteInfoManager: the name server's route tables (upstream ``RouteInfoManager``), pure and thread-safe.

Tables (all guarded by one lock; every public method takes it, and returns copies, never live tables):

- ``topic_queue_table``: topic -> {brokerName: QueueData(brokerName, readQueueNums, writeQueueNums, perm)}
- ``broker_addr_table``: brokerName -> BrokerData(cluster, brokerName, brokerAddrs {brokerId: "host:port"})
- ``cluster_addr_table``: cluster -> set of brokerName
- ``broker_live_table``: brokerAddr -> last heartbeat (ms, from the injected clock)

Invariants (hold after every public method returns):

1. A brokerName is in ``cluster_addr_table[c]`` exactly when ``broker_addr_table`` has it with cluster ``c``.
2. No BrokerData has an empty ``brokerAddrs``; no cluster has an empty set; no topic has an empty dict.
3. Every topic's QueueData names a brokerName present in ``broker_addr_table`` (queue data is dropped with
   the last address of its brokerName, as upstream ``onChannelDestroy``).
4. Only the master (brokerId 0) sets queue data. Its registration carries its whole topic set: topics it no
   longer reports lose its QueueData, and a topic left without QueueData disappears.
5. An address appears at most once in a brokerName's ``brokerAddrs``; a registration under a new brokerId
   (a role switch) removes the old id, as upstream.
6. A broker is removed (like ``unregister_broker``) once its last heartbeat is older than ``expire_ms``
   (:meth:`RouteInfoManager.scan_not_active_broker`, 120 s by default, upstream ``BROKER_CHANNEL_EXPIRED_TIME``).

The name server is stateless: nothing here is persisted; brokers re-register every 30 s.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker_core.protocol.validation import topic_error

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
DEFAULT_PERM = PERM_READ | PERM_WRITE  # 6
PERM_MASK = PERM_READ | PERM_WRITE | PERM_INHERIT

MASTER_ID = 0
BROKER_CHANNEL_EXPIRED_MS = 120_000


class NowClock(Protocol):
    """What the manager needs of a clock (``broker_core.store.clock.Clock`` fits)."""

    def now_ms(self) -> int: ...


class _WallClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


@dataclass(slots=True, frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = DEFAULT_PERM

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm}


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokerName": self.broker_name,
                "brokerAddrs": {str(bid): addr for bid, addr in sorted(self.broker_addrs.items())}}


def queue_data_from_config(broker_name: str, topic: str, config: object) -> QueueData:
    """Validate one entry of a registration's ``topicConfigTable``; ValueError names the bad field."""
    if not isinstance(config, dict):
        raise ValueError(f"topicConfigTable[{topic!r}] is not an object")
    values: dict[str, int] = {}
    for key, default in (("readQueueNums", None), ("writeQueueNums", None), ("perm", DEFAULT_PERM)):
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"topicConfigTable[{topic!r}].{key} must be a non-negative integer, got {value!r}")
        values[key] = value
    if values["perm"] & ~PERM_MASK:
        raise ValueError(f"topicConfigTable[{topic!r}].perm must be a combination of 4, 2 and 1, got {values['perm']}")
    return QueueData(broker_name, values["readQueueNums"], values["writeQueueNums"], values["perm"])


class RouteInfoManager:
    def __init__(self, clock: NowClock | None = None) -> None:
        self.clock: NowClock = clock or _WallClock()
        self._lock = threading.RLock()
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, int] = {}

    # -- registration -------------------------------------------------------------------------------------

    def register_broker(self, cluster: str, broker_name: str, broker_id: int, broker_addr: str,
                        topic_config_table: dict[str, Any] | None = None) -> str | None:
        """Record a broker and refresh its heartbeat; a master's topic set replaces its previous one.

        Returns the master's address when a slave registers and its master is live (upstream HA bootstrap),
        else None. Raises ValueError on a bad topic name or topic config (nothing changes then).
        """
        queue_datas: dict[str, QueueData] = {}
        for topic, config in (topic_config_table or {}).items():
            err = topic_error(topic)
            if err:
                raise ValueError(f"topicConfigTable: {err}")
            queue_datas[topic] = queue_data_from_config(broker_name, topic, config)
        with self._lock:
            data = self.broker_addr_table.get(broker_name)
            if data is None:
                data = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
            elif data.cluster != cluster:
                self._discard_from_cluster(data.cluster, broker_name)
                data.cluster = cluster
            self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
            for bid, addr in list(data.broker_addrs.items()):
                if addr == broker_addr and bid != broker_id:
                    del data.broker_addrs[bid]  # role switch: the same address under a new id
            old_addr = data.broker_addrs.get(broker_id)
            data.broker_addrs[broker_id] = broker_addr
            if old_addr is not None and old_addr != broker_addr and not self._addr_in_use(old_addr):
                self.broker_live_table.pop(old_addr, None)  # the id moved to a new address
            if broker_id == MASTER_ID:
                self._replace_queue_datas(broker_name, queue_datas)
            self.broker_live_table[broker_addr] = self.clock.now_ms()
            if broker_id != MASTER_ID:
                master = data.broker_addrs.get(MASTER_ID)
                if master is not None and master in self.broker_live_table:
                    return master
            return None

    def unregister_broker(self, cluster: str, broker_name: str, broker_id: int, broker_addr: str) -> bool:
        """Remove one broker address (a broker's clean shutdown). True if it was registered.

        ``cluster`` is accepted for protocol symmetry; the cluster recorded for ``broker_name`` is used.
        The brokerId is removed only while it still maps to ``broker_addr``, so a late unregister of an
        old address does not remove the broker that replaced it.
        """
        with self._lock:
            self.broker_live_table.pop(broker_addr, None)
            data = self.broker_addr_table.get(broker_name)
            if data is None or data.broker_addrs.get(broker_id) != broker_addr:
                return False
            self._remove_broker_id(data, broker_id)
            return True

    def scan_not_active_broker(self, now_ms: int | None = None,
                               expire_ms: int = BROKER_CHANNEL_EXPIRED_MS) -> list[str]:
        """Remove every broker whose last heartbeat is older than ``expire_ms``; returns their addresses."""
        with self._lock:
            now = self.clock.now_ms() if now_ms is None else now_ms
            expired = sorted(addr for addr, last in self.broker_live_table.items() if last + expire_ms < now)
            for addr in expired:
                del self.broker_live_table[addr]
                for data in list(self.broker_addr_table.values()):
                    for bid, baddr in list(data.broker_addrs.items()):
                        if baddr == addr:
                            self._remove_broker_id(data, bid)
            return expired

    def delete_topic(self, topic: str) -> bool:
        """Forget a topic's route (admin ``deleteTopic``); True if it existed. Brokers re-registering it revive it."""
        with self._lock:
            return self.topic_queue_table.pop(topic, None) is not None

    # -- reads ----------------------------------------------------------------------------------------------

    def pickup_topic_route(self, topic: str) -> dict[str, Any] | None:
        """``{"queueDatas": [...], "brokerDatas": [...]}`` (wire JSON shape), or None if the topic is unknown."""
        with self._lock:
            queues = self.topic_queue_table.get(topic)
            if not queues:
                return None
            queue_datas = [queues[name].to_json() for name in sorted(queues)]
            broker_datas = [self.broker_addr_table[name].to_json() for name in sorted(queues)
                            if name in self.broker_addr_table]
            if not broker_datas:
                return None
            return {"queueDatas": queue_datas, "brokerDatas": broker_datas}

    def cluster_info(self) -> dict[str, Any]:
        """``{"brokerAddrTable", "clusterAddrTable", "brokerLiveTable"}`` (wire JSON shape)."""
        with self._lock:
            return {
                "brokerAddrTable": {name: self.broker_addr_table[name].to_json()
                                    for name in sorted(self.broker_addr_table)},
                "clusterAddrTable": {cluster: sorted(names)
                                     for cluster, names in sorted(self.cluster_addr_table.items())},
                "brokerLiveTable": {addr: {"lastUpdateTimestamp": last}
                                    for addr, last in sorted(self.broker_live_table.items())},
            }

    def topic_list(self) -> list[str]:
        with self._lock:
            return sorted(self.topic_queue_table)

    # -- internals (lock held) ------------------------------------------------------------------------------

    def _replace_queue_datas(self, broker_name: str, queue_datas: dict[str, QueueData]) -> None:
        for topic in list(self.topic_queue_table):
            if topic not in queue_datas:
                self._drop_queue_data(topic, broker_name)
        for topic, qd in queue_datas.items():
            self.topic_queue_table.setdefault(topic, {})[broker_name] = qd

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is not None and queues.pop(broker_name, None) is not None and not queues:
            del self.topic_queue_table[topic]

    def _remove_broker_id(self, data: BrokerData, broker_id: int) -> None:
        """Upstream ``onChannelDestroy`` for one address: cascade to cluster and topics when the name empties."""
        data.broker_addrs.pop(broker_id, None)
        if data.broker_addrs:
            return
        del self.broker_addr_table[data.broker_name]
        self._discard_from_cluster(data.cluster, data.broker_name)
        for topic in list(self.topic_queue_table):
            self._drop_queue_data(topic, data.broker_name)

    def _discard_from_cluster(self, cluster: str, broker_name: str) -> None:
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]

    def _addr_in_use(self, addr: str) -> bool:
        return any(addr in data.broker_addrs.values() for data in self.broker_addr_table.values())
