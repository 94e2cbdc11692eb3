"""The name server's Prometheus metrics (``--metrics-port`` or ``metricsExporterType=PROM`` in its properties):
requests answered by request and response code (counted per thread, summed at scrape), and read at scrape the
live brokers per cluster and the topics it routes. Series carry ``node_type="namesrv"`` and ``node_id`` (the
listen address). RocketMQ's name server exports no metrics; the names follow its broker's style."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker_core.metrics import Exporter, Tally
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.server import Connection, Handler

if TYPE_CHECKING:
    from broker_core.namesrv.server import NamesrvController

_CODE_NAMES = {int(c): c.name.lower() for c in RequestCode}
_RESPONSE_NAMES = {int(c): c.name.lower() for c in ResponseCode}


class NamesrvMetrics:
    def __init__(self, ns: NamesrvController, node_id: str) -> None:
        self.ns = ns
        self.node_id = node_id
        self.requests = Tally(1)  # (code, response code) -> [count]
        self.exporter: Exporter | None = None
        ns.remoting.handlers = {code: self._counted(code, h) for code, h in ns.remoting.handlers.items()}

    def start(self, host: str, port: int) -> int:
        self.exporter = Exporter(self.collect, host, port)
        return self.exporter.port

    def close(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None

    def _counted(self, code: int, handler: Handler) -> Handler:
        requests = self.requests

        def count(result: object) -> None:
            status = result.code if isinstance(result, RemotingCommand) else -1
            row = requests.table().get((code, status))
            if row is None:
                row = requests.table()[(code, status)] = [0]
            row[0] += 1

        async def finish(pending: Awaitable[Any]) -> Any:
            result = await pending
            count(result)
            return result

        def counted(cmd: RemotingCommand, conn: Connection) -> Any:
            result = handler(cmd, conn)
            if result is not None and not isinstance(result, RemotingCommand) and inspect.isawaitable(result):
                return finish(result)
            count(result)
            return result

        return counted

    def collect(self) -> Iterator[Metric]:
        common = ["node_type", "node_id"]
        values = ["namesrv", self.node_id]
        requests = CounterMetricFamily("rocketmq_namesrv_requests", "Requests answered, by request and response code",
                                       labels=[*common, "request_code", "response_code"])
        for (code, status), row in sorted(self.requests.snapshot().items()):
            requests.add_metric([*values, _CODE_NAMES.get(code, str(code)),
                                 _RESPONSE_NAMES.get(status, str(status)) if status >= 0 else "none"], row[0])
        yield requests
        routes = self.ns.routes
        brokers = GaugeMetricFamily("rocketmq_namesrv_brokers", "Live broker addresses registered, by cluster",
                                    labels=[*common, "cluster"])
        clusters = dict(routes.cluster_addr_table)
        table = dict(routes.broker_addr_table)
        for cluster, names in sorted(clusters.items()):
            n = sum(len(getattr(table.get(name), "broker_addrs", {}) or {}) for name in list(names))
            brokers.add_metric([*values, cluster], n)
        yield brokers
        topics = GaugeMetricFamily("rocketmq_topic_number", "Topics the name server routes", labels=common)
        topics.add_metric(values, len(routes.topic_queue_table))
        yield topics
