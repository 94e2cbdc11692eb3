"""Metrics as an operator gets them: a real Prometheus (Debian's ``prometheus``) scrapes a broker and a name server
started with metrics on, and its HTTP API answers a rate of ``rocketmq_messages_in_total`` that matches the messages
sent; the shipped alert rules load in it and pass ``promtool check rules`` and ``promtool test rules``; every
metric the Grafana dashboard queries is one the processes export."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import Message, Producer, PullConsumer
from tests.conftest import ROOT
from tests.integration.cluster import BrokerProcess, Cluster, free_port, http_up, start_ready, stop_process, wait_until

pytestmark = pytest.mark.integration

DEPLOY = ROOT / "deploy"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                      reason="prometheus/promtool not installed (make system-packages)")
METRICS_CONF = "metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort=0\n"


class MetricsCluster(Cluster):
    """A name server with ``--metrics-port 0`` and brokers with ``metricsExporterType=PROM``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.namesrv_proc, ports = start_ready(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0",
                                                "--scan-interval-ms", "500", "--broker-expire-ms", "5000",
                                                "--metrics-port", "0"], tmp / "namesrv.log")
        self.namesrv = f"127.0.0.1:{ports['port']}"
        self.namesrv_metrics_port = ports["metrics_port"]
        self.brokers: dict[str, BrokerProcess] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    c = MetricsCluster(tmp_path_factory.mktemp("prom"))
    try:
        c.add_brokers_registered({"broker-p": METRICS_CONF})
        yield c
    finally:
        c.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_broker_and_name_server_export_rocketmq_metrics(cluster: MetricsCluster, admin: Any) -> None:
    broker = cluster.brokers["broker-p"]
    admin.create_topic("MetricsT", 2, 2)
    producer = Producer("metrics-producer", cluster.namesrv).start()
    consumer = PullConsumer("metrics-group", cluster.namesrv).start()
    try:
        for i in range(30):
            producer.send(Message("MetricsT", b"m" * (100 + i)))
        pulled = 0
        for mq in consumer.fetch_queues("MetricsT"):
            res = consumer.pull(mq, 0, 32)
            pulled += len(res.messages)
            consumer.commit_offset(mq, res.next_begin_offset - 1 if res.messages else 0)
    finally:
        producer.shutdown()
        consumer.shutdown()
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-p"}
    wait_until(lambda: sample(scrape(broker.metrics_port), "rocketmq_messages_in_total", topic="MetricsT") == 30,
               what="the 30 sends to be counted")
    text = scrape(broker.metrics_port)
    assert sample(text, "rocketmq_messages_in_total", topic="MetricsT", message_type="normal", is_system="false",
                  **common) == 30
    assert sample(text, "rocketmq_message_size_count", topic="MetricsT") == 30
    assert sample(text, "rocketmq_message_size_bucket", topic="MetricsT", le="1024.0") == 30
    stored = sample(text, "rocketmq_throughput_in_total", topic="MetricsT")
    assert stored is not None and stored == sample(text, "rocketmq_message_size_sum", topic="MetricsT") > 30 * 100
    assert sample(text, "rocketmq_messages_out_total", topic="MetricsT", consumer_group="metrics-group") == pulled
    # one message left unconsumed per queue (committed next - 1)
    assert sample(text, "rocketmq_consumer_lag_messages", consumer_group="metrics-group", topic="MetricsT") == 2
    assert sample(text, "rocketmq_consumer_lag_latency_milliseconds", consumer_group="metrics-group",
                  topic="MetricsT") is not None
    assert sample(text, "rocketmq_rpc_latency_milliseconds_count", request_code="pull_message",
                  response_code="success") is not None
    assert sample(text, "rocketmq_storage_size_bytes", storage_type="local", storage_medium="disk")
    assert sample(text, "rocketmq_topic_number", **common) is not None
    ns = scrape(cluster.namesrv_metrics_port)
    assert sample(ns, "rocketmq_namesrv_brokers", node_type="namesrv", cluster="DefaultCluster") == 1
    assert (sample(ns, "rocketmq_namesrv_requests_total", request_code="register_broker", response_code="success")
            or 0) >= 1


@pytest.fixture(scope="module")
def prometheus(cluster: MetricsCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prometheus scraping the broker and the name server every second, with the shipped alert rules."""
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (make system-packages)")
    tmp = tmp_path_factory.mktemp("prometheus")
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(DEPLOY / "prometheus" / "alerts.yml")],
        "scrape_configs": [
            {"job_name": "rocketmq-broker",
             "static_configs": [{"targets": [f"127.0.0.1:{cluster.brokers['broker-p'].metrics_port}"]}]},
            {"job_name": "rocketmq-namesrv",
             "static_configs": [{"targets": [f"127.0.0.1:{cluster.namesrv_metrics_port}"]}]},
        ],
    }
    (tmp / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    log = open(tmp / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--log.level=warn"], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or http_up(url + "/-/ready"), timeout=60, what="Prometheus ready")
        assert proc.poll() is None, (tmp / "prometheus.log").read_text()
        yield url
    finally:
        stop_process(proc)
        log.close()


def query(url: str, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10) as resp:
        doc = json.loads(resp.read())
    assert doc["status"] == "success", doc
    return list(doc["data"]["result"])


def counter_samples(url: str, topic: str) -> list[tuple[float, float]]:
    result = query(url, f'rocketmq_messages_in_total{{topic="{topic}"}}[10m]')
    return [(float(t), float(v)) for t, v in result[0]["values"]] if result else []


@needs_prometheus
def test_prometheus_rate_matches_the_messages_sent(cluster: MetricsCluster, prometheus: str, admin: Any) -> None:
    """One message, seen by Prometheus; then N more, seen; ``increase`` and ``rate`` over exactly the scrapes
    between (no extrapolation to speak of) answer N and N per that many seconds."""
    n = 200
    admin.create_topic("PromRateT", 1, 1)
    producer = Producer("prom-producer", cluster.namesrv).start()
    try:
        producer.send(Message("PromRateT", b"first"))
        wait_until(lambda: any(v == 1 for _t, v in counter_samples(prometheus, "PromRateT")), timeout=60,
                   what="Prometheus to scrape the first message")
        for i in range(n):
            producer.send(Message("PromRateT", f"m{i}".encode()))
    finally:
        producer.shutdown()
    wait_until(lambda: any(v == n + 1 for _t, v in counter_samples(prometheus, "PromRateT")), timeout=60,
               what="Prometheus to scrape all the messages")
    samples = counter_samples(prometheus, "PromRateT")
    t1 = max(t for t, v in samples if v == 1)
    t2 = min(t for t, v in samples if v == n + 1)
    window_ms = round((t2 - t1) * 1000) + 1  # (t2 - window, t2] holds the last scrape at 1 and all up to N+1
    increase = query(prometheus, f'increase(rocketmq_messages_in_total{{topic="PromRateT"}}[{window_ms}ms])', t2)
    rate = query(prometheus, f'rate(rocketmq_messages_in_total{{topic="PromRateT"}}[{window_ms}ms])', t2)
    assert round(float(increase[0]["value"][1])) == n
    assert round(float(rate[0]["value"][1]) * window_ms / 1000) == n
    labels = rate[0]["metric"]
    assert (labels["job"], labels["node_id"], labels["message_type"]) == ("rocketmq-broker", "broker-p", "normal")
    brokers = query(prometheus, 'rocketmq_namesrv_brokers{cluster="DefaultCluster"}')
    assert brokers and float(brokers[0]["value"][1]) == 1
    # the alert rules loaded and evaluate (the broker has no lag or disk pressure: nothing fires)
    with urllib.request.urlopen(f"{prometheus}/api/v1/rules", timeout=10) as resp:
        groups = json.loads(resp.read())["data"]["groups"]
    assert {g["name"] for g in groups} >= {"rocketmq-consumers", "rocketmq-storage", "rocketmq-replication"}
    assert all(r["health"] in ("ok", "unknown") for g in groups for r in g["rules"])


@needs_prometheus
def test_alert_rules_pass_promtool() -> None:
    assert PROMTOOL is not None
    check = subprocess.run([PROMTOOL, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 8 rules found" in check.stdout
    unit = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yml"], cwd=DEPLOY / "prometheus",
                          capture_output=True, text=True, timeout=60)
    assert unit.returncode == 0, unit.stdout + unit.stderr


def test_dashboard_queries_only_exported_metrics(cluster: MetricsCluster) -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "rocketmq-broker.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs and all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])
    used = {m for e in exprs for m in re.findall(r"\b(rocketmq_\w+)", e)}
    exported = set()
    for port in (cluster.brokers["broker-p"].metrics_port, cluster.namesrv_metrics_port):
        for line in scrape(port).splitlines():
            if line.startswith("# TYPE "):
                name, kind = line.split()[2:4]
                exported |= {name, name + "_total"} if kind == "counter" else {name}
                if kind == "histogram":
                    exported |= {name + "_bucket", name + "_count", name + "_sum"}
    assert used <= exported, sorted(used - exported)


def test_controller_exports_its_role(tmp_path: Path) -> None:
    from tests.integration.controller_procs import controller_confs

    (conf,), _peers = controller_confs(tmp_path, 1, METRICS_CONF)
    proc, ports = start_ready(["-m", "broker_core.controller", "--config", str(conf)], tmp_path / "controller.log")
    try:
        port = ports["metrics_port"]
        wait_until(lambda: sample(scrape(port), "rocketmq_role", node_type="controller", node_id="n0",
                                  group="group1") == 1, timeout=60, what="the single controller to lead")
    finally:
        stop_process(proc)
