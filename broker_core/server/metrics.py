"""The broker's Prometheus metrics (``metricsExporterType=PROM``): RocketMQ 5's instruments and labels
(reference/rocketmq-ops-dashboard.md §1), served by :class:`broker_core.metrics.Exporter`.

Where each number comes from, and what it costs:

- ``rocketmq_messages_in_total``, ``rocketmq_throughput_in_total``, ``rocketmq_message_size``: counted by a store
  arrival listener, per dispatched batch, off the send's path (the dispatcher runs after the answer; the send lane
  in C is not touched), into a per-thread :class:`~broker_core.metrics.Tally`. Sizes are the stored record's.
  ``message_type``: transaction (a prepared record), delay (the schedule topic, its records keep the topic
  ``SCHEDULE_TOPIC_XXXX``), else normal. Retry and DLQ topics are skipped, as RocketMQ does.
- ``rocketmq_messages_out_total``, ``rocketmq_throughput_out_total``: per answered pull (the wrapped handler),
  ``nextBeginOffset - offset`` messages and the body's bytes.
- ``rocketmq_rpc_latency``: each request through the dispatcher (the handlers are wrapped only while metrics are
  on; sends the C lane answers whole are not in it), by request and response code.
- gauges read at scrape: storage size and flush/dispatch lag, consumer lag (messages and the age of the oldest
  unconsumed message) per group and topic, POP in-flight messages, connections, topic and group counts, the
  broker's permission and each slave's replication lag.

All series carry ``cluster``, ``node_type="broker"``, ``node_id`` (brokerName) and the ``metricsLabel`` pairs."""

from __future__ import annotations

import bisect
import inspect
import operator
import os
import time
from collections.abc import Awaitable, Iterator
from itertools import groupby
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from broker_core.codec.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, SYSTEM_TOPICS
from broker_core.metrics import Exporter, Tally, parse_labels
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.server import Connection, Handler

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

SIZE_BUCKETS = (1024, 4096, 524288, 1048576, 2097152, 4194304)  # rocketmq_message_size
RPC_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)  # rocketmq_rpc_latency
_PREPARED = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE
_TOPIC_FLAG = operator.itemgetter(2, 9)  # a dispatch tuple's topic and sys flag
_SIZE = operator.itemgetter(1)
_SMALL_BATCH = 8
_CODE_NAMES = {int(c): c.name.lower() for c in RequestCode}
_RESPONSE_NAMES = {int(c): c.name.lower() for c in ResponseCode}


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.lower().startswith("rmq_sys_")


def is_system_group(group: str) -> bool:
    return group.upper().startswith("CID_RMQ_SYS_")


def _b(flag: bool) -> str:
    return "true" if flag else "false"


class BrokerMetrics:
    """Counts what passes and reads the rest from the broker at scrape time (module docstring)."""

    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        cfg = ctl.config
        self.common = {"cluster": cfg.broker_cluster_name, "node_type": "broker", "node_id": cfg.broker_name,
                       **parse_labels(cfg.metrics.metrics_label)}
        # (topic, prepared) -> [msgs, bytes, a count per size bucket, the count over the last bucket, size sum]
        self.inbound = Tally(2 + len(SIZE_BUCKETS) + 2)
        self.outbound = Tally(2)  # (topic, group) -> [msgs, bytes]
        self.rpc = Tally(len(RPC_BUCKETS_MS) + 3)  # (code, response) -> [buckets..., +Inf, count, sum in us]
        self.exporter: Exporter | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, host: str, port: int) -> int:
        self.ctl.store.add_arrival_listener(self.arrived)
        self.exporter = Exporter(self.collect, host, port)
        return self.exporter.port

    def close(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None

    # ------------------------------------------------------------------ counting (no lock)
    def arrived(self, batch: list[tuple[Any, ...]]) -> None:
        """A dispatched batch: ``(phy, size, topic, queue_id, queue_offset, tags_code, store_timestamp, keys,
        uniq_key, sys_flag)`` tuples, counted with C-level calls only (``map``, ``list.count``, ``sorted``,
        ``groupby``, a ``bisect`` per bucket bound): one topic in the batch (the common case) costs a few tens of
        ns a message; mixed topics add one sort of the batch. (A Python loop per message cost ~10x more.)"""
        if len(batch) <= _SMALL_BATCH:  # a few records (sends one at a time): the calls below cost more per batch
            self._count_each(batch)
            return
        keys = list(map(_TOPIC_FLAG, batch))
        if keys.count(keys[0]) == len(keys):
            self._count(keys[0], sorted(map(_SIZE, batch)))
            return
        for key, run in groupby(sorted(batch, key=_TOPIC_FLAG), _TOPIC_FLAG):
            self._count(key, sorted(map(_SIZE, run)))

    def _count_each(self, batch: list[tuple[Any, ...]]) -> None:
        table = self.inbound.table()
        for record in batch:
            topic, size = record[2], record[1]
            key = (topic, record[9] & _PREPARED)
            row = table.get(key)
            if row is None:
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                    continue
                row = table[key] = [0] * self.inbound.width
            row[0] += 1
            row[1] += size
            row[-1] += size
            row[2 + bisect.bisect_left(SIZE_BUCKETS, size)] += 1

    def _count(self, topic_flag: tuple[str, int], sizes: list[int]) -> None:
        """One topic's stored records (sizes sorted): messages, bytes, and the size histogram's buckets."""
        topic, flag = topic_flag
        table = self.inbound.table()
        key = (topic, flag & _PREPARED)
        row = table.get(key)
        if row is None:
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                return
            row = table[key] = [0] * self.inbound.width
        total = sum(sizes)
        row[0] += len(sizes)
        row[1] += total
        row[-1] += total
        lo = 0
        for i, bound in enumerate(SIZE_BUCKETS):  # le: sizes up to and including the bound
            hi = bisect.bisect_right(sizes, bound, lo)
            row[2 + i] += hi - lo
            lo = hi
        row[2 + len(SIZE_BUCKETS)] += len(sizes) - lo

    def instrument(self, handlers: dict[int, Handler]) -> dict[int, Handler]:
        """Each handler timed into ``rocketmq_rpc_latency`` (and a pull's messages counted out)."""
        return {code: self._timed(code, h) for code, h in handlers.items()}

    def _timed(self, code: int, handler: Handler) -> Handler:
        rpc = self.rpc
        pull = code == RequestCode.PULL_MESSAGE
        outbound = self.outbound
        clock = time.perf_counter

        def done(cmd: RemotingCommand, result: object, began: float) -> None:
            spent_us = int((clock() - began) * 1_000_000)
            resp = getattr(result, "command", result)
            status = resp.code if isinstance(resp, RemotingCommand) else (0 if isinstance(resp, bytes) else -1)
            row = rpc.table().get((code, status))
            if row is None:
                row = rpc.table()[(code, status)] = [0] * rpc.width
            row[bisect.bisect_left(RPC_BUCKETS_MS, spent_us / 1000)] += 1
            row[-2] += 1
            row[-1] += spent_us
            if pull and status == ResponseCode.SUCCESS and isinstance(resp, RemotingCommand):
                h = cmd.header
                try:
                    n = int(resp.header.get("nextBeginOffset", 0)) - int(h.get("queueOffset", 0))
                except (TypeError, ValueError):
                    n = 0
                parts = getattr(result, "parts", None)
                size = sum(len(p) for p in parts) if parts is not None else len(resp.body or b"")
                key = (str(h.get("topic", "")), str(h.get("consumerGroup", "")))
                o = outbound.table().get(key)
                if o is None:
                    o = outbound.table()[key] = [0, 0]
                o[0] += max(n, 0)
                o[1] += size

        async def finish(cmd: RemotingCommand, pending: Awaitable[Any], began: float) -> Any:
            result = await pending
            done(cmd, result, began)
            return result

        def timed(cmd: RemotingCommand, conn: Connection) -> Any:
            began = clock()
            result = handler(cmd, conn)
            if (result is not None and type(result) is not RemotingCommand and type(result) is not bytes
                    and inspect.isawaitable(result)):
                return finish(cmd, result, began)
            done(cmd, result, began)
            return result

        return timed

    # ------------------------------------------------------------------ scrape
    def collect(self) -> Iterator[Metric]:
        common = self.common
        names = list(common)
        values = [common[k] for k in names]
        yield from self._inbound(names, values)
        yield from self._outbound(names, values)
        yield from self._rpc(names, values)
        yield from self._storage(names, values)
        yield from self._consumers(names, values)
        yield from self._connections(names, values)
        yield from self._replication(names, values)

    def _inbound(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        labels = [*names, "topic", "message_type", "is_system"]
        msgs = CounterMetricFamily("rocketmq_messages_in", "Messages stored, by topic", labels=labels)
        size = CounterMetricFamily("rocketmq_throughput_in", "Bytes stored (records as stored), by topic",
                                   labels=labels)
        hist = HistogramMetricFamily("rocketmq_message_size", "Size of the stored records", labels=labels)
        for (topic, prepared), row in sorted(self.inbound.snapshot().items()):
            kind = "transaction" if prepared else ("delay" if topic == SCHEDULE_TOPIC else "normal")
            lv = [*values, topic, kind, _b(is_system_topic(topic))]
            msgs.add_metric(lv, row[0])
            size.add_metric(lv, row[1])
            cumulative, buckets = 0, []
            for bound, n in zip(SIZE_BUCKETS, row[2:2 + len(SIZE_BUCKETS)], strict=True):
                cumulative += n
                buckets.append((f"{float(bound)}", cumulative))
            buckets.append(("+Inf", cumulative + row[2 + len(SIZE_BUCKETS)]))
            hist.add_metric(lv, buckets, row[-1])
        yield from (msgs, size, hist)

    def _outbound(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        labels = [*names, "topic", "consumer_group", "is_system"]
        msgs = CounterMetricFamily("rocketmq_messages_out", "Messages pulled, by topic and group", labels=labels)
        size = CounterMetricFamily("rocketmq_throughput_out", "Bytes pulled, by topic and group", labels=labels)
        for (topic, group), row in sorted(self.outbound.snapshot().items()):
            lv = [*values, topic, group, _b(is_system_topic(topic) or is_system_group(group))]
            msgs.add_metric(lv, row[0])
            size.add_metric(lv, row[1])
        yield from (msgs, size)

    def _rpc(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        labels = [*names, "protocol_type", "request_code", "response_code", "is_long_polling", "result"]
        hist = HistogramMetricFamily("rocketmq_rpc_latency", "Time to answer a request, in milliseconds",
                                     labels=labels, unit="milliseconds")
        for (code, status), row in sorted(self.rpc.snapshot().items()):
            result = "success" if status >= 0 else "oneway"
            lv = [*values, "remoting", _CODE_NAMES.get(code, str(code)),
                  _RESPONSE_NAMES.get(status, str(status)) if status >= 0 else "", _b(code == RequestCode.PULL_MESSAGE),
                  result]
            cumulative, buckets = 0, []
            for bound, n in zip(RPC_BUCKETS_MS, row, strict=False):
                cumulative += n
                buckets.append((f"{float(bound)}", cumulative))
            buckets.append(("+Inf", row[-2]))
            hist.add_metric(lv, buckets, row[-1] / 1000)
        yield hist

    def _storage(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        store = self.ctl.store
        labels = [*names, "storage_type", "storage_medium"]
        lv = [*values, "local", "disk"]
        info = store.runtime_info()
        root = self.ctl.config.store.store_path_root_dir
        for name, doc, value in (
                ("rocketmq_storage_size", "Bytes of the store directory", _dir_size(root)),
                ("rocketmq_storage_flush_behind_bytes", "CommitLog bytes written but not flushed",
                 info["flush_lag_bytes"]),
                ("rocketmq_storage_dispatch_behind_bytes", "CommitLog bytes not dispatched to queues yet",
                 info["dispatch_behind_bytes"]),
                ("rocketmq_storage_disk_ratio", "Used fraction of the CommitLog's disk", store.check_disk().ratio)):
            g = GaugeMetricFamily(name, doc, labels=labels, unit="" if name.endswith("ratio") else "bytes")
            g.add_metric(lv, float(value) if isinstance(value, int | float) else 0.0)
            yield g
        ctl = self.ctl
        for name, doc, value in (
                ("rocketmq_topic_number", "Topics this broker holds", len(ctl.topics.table)),
                ("rocketmq_consumer_group_number", "Subscription groups this broker holds", len(ctl.groups.table)),
                ("rocketmq_broker_permission", "The broker's permission (2 W, 4 R, 6 RW)",
                 getattr(ctl.config, "broker_permission", 6))):
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(values, float(value))
            yield g

    def _consumers(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        ctl, store = self.ctl, self.ctl.store
        labels = [*names, "consumer_group", "topic", "is_retry", "is_system"]
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages", "Messages not consumed yet", labels=labels)
        latency = GaugeMetricFamily("rocketmq_consumer_lag_latency",
                                    "Age of the oldest message not consumed yet, in milliseconds", labels=labels,
                                    unit="milliseconds")
        inflight = GaugeMetricFamily("rocketmq_consumer_inflight_messages",
                                     "Messages received (POP) and not acknowledged yet", labels=labels)
        now = int(time.time() * 1000)
        pop_inflight = dict(getattr(ctl.pop_service.state, "inflight_by_group", {}))
        for key, queues in sorted(list(ctl.offsets.table.items())):
            topic, _, group = key.partition("@")
            behind, oldest = 0, 0
            for queue_id, committed in list(queues.items()):
                top = store.get_max_offset_in_queue(topic, queue_id)
                if committed < top:
                    behind += top - committed
                    stored = store.get_queue_store_time(topic, queue_id, max(committed, 0))
                    if stored > 0:
                        oldest = max(oldest, now - stored)
            lv = [*values, group, topic, _b(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                  _b(is_system_topic(topic) or is_system_group(group))]
            lag.add_metric(lv, behind)
            latency.add_metric(lv, oldest)
            inflight.add_metric(lv, float(pop_inflight.get(group, 0)) if isinstance(pop_inflight.get(group), int)
                                else 0.0)
        yield from (lag, latency, inflight)

    def _connections(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        consumers = self.ctl.consumers
        prod = GaugeMetricFamily("rocketmq_producer_connections", "Producer connections",
                                 labels=[*names, "language", "version", "protocol_type"])
        counts: dict[tuple[str, str], int] = {}
        for producers in list(consumers.producers.values()):
            for conn in list(producers.values()):
                pk = (str(conn.attributes.get("language", "java")).lower(), _version(conn.attributes.get("version", 0)))
                counts[pk] = counts.get(pk, 0) + 1
        for (language, version), n in sorted(counts.items()):
            prod.add_metric([*values, language, version, "remoting"], n)
        cons = GaugeMetricFamily("rocketmq_consumer_connections", "Consumer connections",
                                 labels=[*names, "consumer_group", "language", "version", "consume_mode",
                                         "protocol_type", "is_system"])
        ccounts: dict[tuple[str, str, str, str], int] = {}
        for group, members in list(consumers.groups.items()):
            for info in list(members.values()):
                mode = "pull" if "ACTIVE" in str(info.consume_type).upper() or info.consume_type == "PULL" else "push"
                k = (group, str(info.language).lower(), _version(info.version), mode)
                ccounts[k] = ccounts.get(k, 0) + 1
        for (group, language, version, mode), n in sorted(ccounts.items()):
            cons.add_metric([*values, group, language, version, mode, "remoting", _b(is_system_group(group))], n)
        yield from (prod, cons)

    def _replication(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        lag = GaugeMetricFamily("rocketmq_replication_lag_bytes",
                                "CommitLog bytes a slave has not acknowledged yet (master side)",
                                labels=[*names, "slave"], unit="bytes")
        behind = GaugeMetricFamily("rocketmq_replication_lag_seconds",
                                   "How long a slave has been behind the master's end", labels=[*names, "slave"],
                                   unit="seconds")
        info = self.ctl.ha.runtime_info()
        slaves = info.get("haSlaves")
        for slave in slaves if isinstance(slaves, list) else []:
            lag.add_metric([*values, str(slave.get("remote"))], float(slave.get("lagBytes", 0)))
            behind.add_metric([*values, str(slave.get("remote"))], float(slave.get("lagSeconds", 0)))
        yield from (lag, behind)


def _version(ordinal: object) -> str:
    """``v4_9_4`` from a ``Version`` ordinal (lower case, as RocketMQ labels it)."""
    try:
        v = int(str(ordinal))
    except ValueError:
        return str(ordinal).lower()
    if not 212 <= v <= 611:
        return str(v)
    k, final = divmod(v - 212, 2)
    name = f"v{4 + k // 100}_{(k % 100) // 10}_{k % 10}"
    return name if final else name + "_snapshot"


def _dir_size(root: object) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(str(root)):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total

