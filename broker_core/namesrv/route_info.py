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
4. Only the master (brokerId 0) sets queue data, and only when its ``dataVersion`` differs from the one it
   last registered (or on its first registration, or when it sends none), as upstream. Its registration
   carries its whole topic set: topics it no longer reports lose its QueueData, and a topic left without
   QueueData disappears (upstream keeps them until DELETE_TOPIC_IN_NAMESRV; clients see the same routes).
5. An address appears at most once in a brokerName's ``brokerAddrs``; a registration under a new brokerId
   (a role switch) removes the old id, as upstream.
6. A broker is removed (like ``unregister_broker``) once its last heartbeat is older than ``expire_ms``
   (:meth:`RouteInfoManager.scan_not_active_broker`, 120 s by default, upstream ``BROKER_CHANNEL_EXPIRED_TIME``).
7. RocketMQ 5 controller mode: a registration is ignored when another live address holds its brokerId with a
   higher DataVersion ``stateVersion`` (the master epoch), so a deposed master cannot reclaim id 0.

The name server is stateless: nothing here is persisted; brokers re-register every 30 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker_core.protocol.validation import topic_error

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
DEFAULT_PERM = PERM_READ | PERM_WRITE  # 6
PERM_PRIORITY = 8
PERM_MASK = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT

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
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's QueueData; the flag under both its 4.9 key ``topicSysFlag`` and the 4.8 ``topicSynFlag``
        that client-go still reads (readers ignore keys they do not know)."""
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSynFlag": self.topic_sys_flag, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's BrokerData; ``brokerAddrs`` keys are brokerIds as (quoted) strings."""
        return {"brokerAddrs": {str(bid): addr for bid, addr in sorted(self.broker_addrs.items())},
                "brokerName": self.broker_name, "cluster": self.cluster}


def queue_data_from_config(broker_name: str, topic: str, config: object) -> QueueData:
    """Validate one entry of a registration's ``topicConfigTable``; ValueError names the bad field."""
    if not isinstance(config, dict):
        raise ValueError(f"topicConfigTable[{topic!r}] is not an object")
    read, write = config.get("readQueueNums"), config.get("writeQueueNums")
    perm, flag = config.get("perm", DEFAULT_PERM), config.get("topicSysFlag", 0)
    if (type(read) is int and type(write) is int and type(perm) is int and type(flag) is int  # fast path
            and read >= 0 and write >= 0 and flag >= 0 and 0 <= perm and not perm & ~PERM_MASK):
        return QueueData(broker_name, read, write, perm, flag)
    values: dict[str, int] = {}
    for key, default in (("readQueueNums", None), ("writeQueueNums", None), ("perm", DEFAULT_PERM),
                         ("topicSysFlag", 0)):
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"topicConfigTable[{topic!r}].{key} must be a non-negative integer, got {value!r}")
        values[key] = value
    if values["perm"] & ~PERM_MASK:
        raise ValueError(f"topicConfigTable[{topic!r}].perm must be a combination of 8, 4, 2 and 1, "
                         f"got {values['perm']}")
    return QueueData(broker_name, values["readQueueNums"], values["writeQueueNums"], values["perm"],
                     values["topicSysFlag"])


def normalize_data_version(raw: object) -> dict[str, int] | None:
    """A ``DataVersion`` as ``{"counter", "timestamp"}`` ints (upstream ``DataVersion.equals`` compares these
    two), or None when there is none to compare (missing, empty or malformed: then it always counts as
    changed, as a Java wrapper without one gets a fresh timestamp)."""
    if not isinstance(raw, dict) or not raw:
        return None
    try:
        return {"counter": int(str(raw.get("counter", 0))), "timestamp": int(str(raw.get("timestamp", 0)))}
    except ValueError:
        return None


def _state_version(raw: object) -> int:
    """RocketMQ 5's ``DataVersion.stateVersion`` (the master epoch in controller mode; 0 when absent)."""
    if not isinstance(raw, dict):
        return 0
    try:
        return int(str(raw.get("stateVersion", 0)))
    except ValueError:
        return 0


class RouteInfoManager:
    def __init__(self, clock: NowClock | None = None) -> None:
        self.clock: NowClock = clock or _WallClock()
        self._lock = threading.RLock()
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, int] = {}
        self.broker_ha_addr: dict[str, str] = {}  # brokerAddr -> haServerAddr it registered
        self.broker_state_version: dict[str, int] = {}  # brokerAddr -> DataVersion.stateVersion (master epoch)
        self.broker_data_version: dict[str, dict[str, Any]] = {}  # brokerAddr -> DataVersion it registered

    # -- registration -------------------------------------------------------------------------------------

    def register_broker(self, cluster: str, broker_name: str, broker_id: int, broker_addr: str,
                        topic_config_table: dict[str, Any] | None = None, ha_server_addr: str = "",
                        data_version: dict[str, Any] | None = None) -> str | None:
        """Record a broker and refresh its heartbeat (upstream ``RouteInfoManager.registerBroker``).

        A master's topic set replaces its previous one when this is its first registration or its
        ``data_version`` changed (an empty or missing one always counts as changed). Returns the master's
        address when a slave registers and its master is live (upstream HA bootstrap), else None
        (:meth:`ha_server_addr` gives the master's HA address). Raises ValueError on a bad topic name or
        topic config (nothing changes then).
        """
        queue_datas: dict[str, QueueData] = {}
        for topic, config in (topic_config_table or {}).items():
            err = topic_error(topic)
            if err:
                raise ValueError(f"topicConfigTable: {err}")
            queue_datas[topic] = queue_data_from_config(broker_name, topic, config)
        version = normalize_data_version(data_version)
        state_version = _state_version(data_version)
        with self._lock:
            data = self.broker_addr_table.get(broker_name)
            holder = data.broker_addrs.get(broker_id) if data is not None else None
            if (holder is not None and holder != broker_addr and holder in self.broker_live_table
                    and self.broker_state_version.get(holder, 0) > state_version):
                # RocketMQ 5 (controller mode): a stale master cannot take the id back from a newer one
                self.broker_live_table.pop(broker_addr, None)
                return None
            register_first = data is None
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
            register_first = register_first or old_addr is None
            if old_addr is not None and old_addr != broker_addr and not self._addr_in_use(old_addr):
                self._forget_addr(old_addr)  # the id moved to a new address
            if broker_id == MASTER_ID:
                stored = self.broker_data_version.get(broker_addr)
                if register_first or version is None or stored is None or stored != version:
                    self._replace_queue_datas(broker_name, queue_datas)
            self.broker_live_table[broker_addr] = self.clock.now_ms()
            self.broker_ha_addr[broker_addr] = ha_server_addr
            self.broker_state_version[broker_addr] = state_version
            if version is None:
                self.broker_data_version.pop(broker_addr, None)
            else:
                self.broker_data_version[broker_addr] = version
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
            self._forget_addr(broker_addr)
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
                self._forget_addr(addr)
                for data in list(self.broker_addr_table.values()):
                    for bid, baddr in list(data.broker_addrs.items()):
                        if baddr == addr:
                            self._remove_broker_id(data, bid)
            return expired

    def ha_server_addr(self, broker_addr: str) -> str:
        """The HA address ``broker_addr`` registered ("" when none)."""
        with self._lock:
            return self.broker_ha_addr.get(broker_addr, "")

    def query_data_version(self, broker_addr: str, data_version: dict[str, Any] | None
                           ) -> tuple[bool, dict[str, Any] | None]:
        """QUERY_DATA_VERSION: whether ``data_version`` differs from the one the broker last registered, and that
        one (None when unknown). An unchanged version refreshes the broker's heartbeat, as upstream."""
        version = normalize_data_version(data_version)
        with self._lock:
            stored = self.broker_data_version.get(broker_addr)
            changed = stored is None or version is None or stored != version
            if not changed and broker_addr in self.broker_live_table:
                self.broker_live_table[broker_addr] = self.clock.now_ms()
            return changed, (dict(stored) if stored is not None else None)

    def change_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_/ADD_WRITE_PERM_OF_BROKER: clear the write bit of every queue data of ``broker_name``, or set
        its perm to read|write (6, exactly as upstream, whatever it was); returns how many topics it has queue
        data in."""
        with self._lock:
            count = 0
            for queues in self.topic_queue_table.values():
                qd = queues.get(broker_name)
                if qd is None:
                    continue
                perm = PERM_READ | PERM_WRITE if writable else qd.perm & ~PERM_WRITE
                queues[broker_name] = QueueData(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, perm,
                                                qd.topic_sys_flag)
                count += 1
            return count

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queue data on a broker of ``cluster``."""
        with self._lock:
            names = self.cluster_addr_table.get(cluster, set())
            return sorted(t for t, queues in self.topic_queue_table.items() if names & set(queues))

    def topics_by_sys_flag(self, predicate: Callable[[int], bool]) -> list[str]:
        """Topics whose (first, by broker name) queue data's ``topicSysFlag`` passes ``predicate`` (upstream
        ``topicQueueTableIter``, behind the unit topic lists 311-313)."""
        with self._lock:
            return sorted(t for t, queues in self.topic_queue_table.items()
                          if queues and predicate(queues[min(queues)].topic_sys_flag))

    def system_topic_list(self) -> dict[str, Any]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS's ``TopicList``: every cluster name and broker name (RocketMQ's
        per-cluster and per-broker system topics) and, in ``brokerAddr``, one broker address to ask (the first
        broker's lowest id, i.e. its master when it has one); no ``brokerAddr`` without brokers."""
        with self._lock:
            names: list[str] = []
            for cluster in sorted(self.cluster_addr_table):
                names.append(cluster)
                names.extend(sorted(self.cluster_addr_table[cluster]))
            out: dict[str, Any] = {"topicList": list(dict.fromkeys(names))}
            for name in sorted(self.broker_addr_table):
                addrs = self.broker_addr_table[name].broker_addrs
                if addrs:
                    out["brokerAddr"] = addrs[min(addrs)]
                    break
            return out

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget a topic's route (admin ``deleteTopic``); with ``cluster``, only the queue data of that
        cluster's brokers (upstream ``deleteTopic(topic, clusterName)``). True if something was removed.
        Brokers re-registering the topic with a new dataVersion revive it."""
        with self._lock:
            if not cluster:
                return self.topic_queue_table.pop(topic, None) is not None
            queues = self.topic_queue_table.get(topic)
            if queues is None:
                return False
            removed = False
            for name in self.cluster_addr_table.get(cluster, set()):
                removed = queues.pop(name, None) is not None or removed
            if not queues:
                del self.topic_queue_table[topic]
            return removed

    # -- reads ----------------------------------------------------------------------------------------------

    def pickup_topic_route(self, topic: str) -> dict[str, Any] | None:
        """RocketMQ's TopicRouteData ``{"brokerDatas": [...], "filterServerTable": {}, "queueDatas": [...]}``, or
        None if the topic is unknown."""
        with self._lock:
            queues = self.topic_queue_table.get(topic)
            if not queues:
                return None
            queue_datas = [queues[name].to_json() for name in sorted(queues)]
            broker_datas = [self.broker_addr_table[name].to_json() for name in sorted(queues)
                            if name in self.broker_addr_table]
            if not broker_datas:
                return None
            return {"brokerDatas": broker_datas, "filterServerTable": {}, "queueDatas": queue_datas}

    def cluster_info(self) -> dict[str, Any]:
        """RocketMQ's ``ClusterInfo`` ``{"brokerAddrTable": {name: BrokerData}, "clusterAddrTable": {cluster:
        [names]}}`` (wire JSON shape, nothing else)."""
        with self._lock:
            return {
                "brokerAddrTable": {name: self.broker_addr_table[name].to_json()
                                    for name in sorted(self.broker_addr_table)},
                "clusterAddrTable": {cluster: sorted(names)
                                     for cluster, names in sorted(self.cluster_addr_table.items())},
            }

    def live_table(self) -> dict[str, int]:
        """brokerAddr -> last heartbeat (ms); not on the wire (upstream keeps it private too)."""
        with self._lock:
            return dict(sorted(self.broker_live_table.items()))

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

    def _forget_addr(self, addr: str) -> None:
        self.broker_live_table.pop(addr, None)
        self.broker_ha_addr.pop(addr, None)
        self.broker_data_version.pop(addr, None)
        self.broker_state_version.pop(addr, None)

    def _addr_in_use(self, addr: str) -> bool:
        return any(addr in data.broker_addrs.values() for data in self.broker_addr_table.values())
