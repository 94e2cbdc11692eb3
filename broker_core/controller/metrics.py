"""The controller's Prometheus metrics (``metricsExporterType=PROM`` with ``metricsPromExporterHost`` and
``metricsPromExporterPort`` in its properties), read at scrape, RocketMQ 5's controller names
(``ControllerMetricsConstant``): ``rocketmq_role`` (1 on the Raft leader, 0 elsewhere), ``rocketmq_active_broker_num``
per cluster and broker-set (brokers whose heartbeats are current), and ours in the same style,
``rocketmq_controller_master_epoch`` and ``rocketmq_controller_sync_state_set_size`` per broker-set. Series carry
``node_type="controller"``, ``node_id`` (controllerDLegerSelfId) and ``group`` (controllerDLegerGroup)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

from broker_core.metrics import Exporter

if TYPE_CHECKING:
    from broker_core.controller.manager import ControllerManager


class ControllerMetrics:
    def __init__(self, manager: ControllerManager) -> None:
        self.manager = manager
        self.exporter: Exporter | None = None

    def start(self, host: str, port: int) -> int:
        self.exporter = Exporter(self.collect, host, port)
        return self.exporter.port

    def close(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None

    def collect(self) -> Iterator[Metric]:
        m = self.manager
        cfg = m.config
        names = ["node_type", "node_id", "group"]
        values = ["controller", cfg.controller_dleger_self_id, cfg.controller_dleger_group]
        leader_id, leader_addr = m.leader()
        role = GaugeMetricFamily("rocketmq_role", "1 on the controllers' Raft leader, 0 on the others",
                                 labels=[*names, "leader"])
        role.add_metric([*values, leader_addr or ""], 1.0 if leader_id == cfg.controller_dleger_self_id else 0.0)
        yield role
        active = GaugeMetricFamily("rocketmq_active_broker_num", "Brokers with current heartbeats, per broker-set",
                                   labels=[*names, "cluster", "broker_set"])
        counts: dict[tuple[str, str], int] = {}
        with m.lock:
            for cluster, broker_name, _broker_id in list(m.heartbeats.table):
                counts[(cluster, broker_name)] = counts.get((cluster, broker_name), 0) + 1
            sync = {name: info for name, info in m.state.sync_state_info.items()}
        for (cluster, broker_set), n in sorted(counts.items()):
            active.add_metric([*values, cluster, broker_set], n)
        yield active
        epoch = GaugeMetricFamily("rocketmq_controller_master_epoch", "The master epoch of each broker-set",
                                  labels=[*names, "broker_set"])
        size = GaugeMetricFamily("rocketmq_controller_sync_state_set_size", "Brokers in each SyncStateSet",
                                 labels=[*names, "broker_set"])
        for broker_set, info in sorted(sync.items()):
            epoch.add_metric([*values, broker_set], float(getattr(info, "master_epoch", 0)))
            size.add_metric([*values, broker_set], float(len(getattr(info, "sync_state_set", ()) or ())))
        yield from (epoch, size)
