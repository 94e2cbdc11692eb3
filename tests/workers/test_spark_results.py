"""Spark job results written where the spark worker writes and read back through it, with every part real: the
console (``manage.py runserver``) and a ``celery worker -Q spark`` on one SQLite file, a real redis-server and the
workers suite's brokers. The REST API starts a search and a trace; the worker runs them and writes to its results
URI; the results, pages of rows (bodies for operators only), the trace and both exports come back through the
worker (the export in many small chunks). The console's own ``SPARK_RESULTS_URI`` names a directory that never
exists, so nothing it shows can come from a shared directory.

Two results URIs, one stack each:

- ``path``: a directory only the worker's settings name;
- ``hadoop``: ``brokerres:///...``, a scheme Python cannot open, mapped by the worker's ``SPARK_CONF_*`` to
  Hadoop's local filesystem (``spark.hadoop.fs.brokerres.impl=org.apache.hadoop.fs.RawLocalFileSystem``): the
  files are written and read through Hadoop's ``FileSystem`` API in the worker's SparkSession JVM, as they would
  be on HDFS or S3. The test then finds them at the local path behind the scheme.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, Producer
from tests.conftest import ROOT
from tests.integration.cluster import Cluster, free_port, http_up, stop_process, wait_until
from tests.workers.conftest import celery_worker, make_topic, manage, worker_env
from workers.celery import app

pytestmark = pytest.mark.integration
PASSWORD = "spark-results-pw"
CHUNK = 512  # the console's export chunk: a few KiB of export take many worker calls
HADOOP_FS = "spark.hadoop.fs.brokerres.impl=org.apache.hadoop.fs.RawLocalFileSystem"


@dataclass
class Stack:
    kind: str
    base_url: str
    tokens: dict[str, str]
    db_path: Path
    results_local: Path  # where the files are on this host (for the hadoop kind: the path behind brokerres://)
    results_uri: str
    console_results: Path

    def request(self, method: str, path: str, role: str = "admin", body: Any = None) -> tuple[int, dict[str, str],
                                                                                              bytes]:
        req = urllib.request.Request(f"{self.base_url}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Token {self.tokens[role]}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def api(self, method: str, path: str, role: str = "admin", body: Any = None) -> Any:
        status, _, data = self.request(method, path, role, body)
        assert status in (200, 202), (path, status, data[:2000])
        return json.loads(data)

    def finished(self, kind: str, job_id: int) -> dict[str, Any]:
        wait_until(lambda: not self.api("GET", f"/api/v1/{kind}/{job_id}/")["running"], timeout=300,
                   what=f"{kind} {job_id} to end")
        state = self.api("GET", f"/api/v1/{kind}/{job_id}/")
        assert state["status"] == "done", state
        return state

    def files(self, job_id: int) -> dict[str, str]:
        with sqlite3.connect(self.db_path, timeout=30) as db:
            (result,) = db.execute("SELECT result FROM console_job WHERE id = ?", (job_id,)).fetchone()
        files: dict[str, str] = json.loads(result)["files"]
        return files


@pytest.fixture(scope="module", params=["path", "hadoop"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, redis_url: str,
          cluster: Cluster) -> Iterator[Stack]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"spark-results-{kind}")
    db_path = tmp / "console.sqlite3"
    base = worker_env(redis_url, cluster.namesrv, db_path)
    results_local = tmp / "worker-only" / "results"
    if kind == "path":
        results_uri, spark_env = str(results_local), {}
    else:
        results_uri, spark_env = f"brokerres://{results_local}", {"SPARK_CONF_RESULTSFS": HADOOP_FS}
    worker = {**base, "SPARK_RESULTS_URI": results_uri, "SPARK_MASTER": "local[1]", "SPARK_DRIVER_MEMORY": "512m",
              "SPARK_CONF_UI": "spark.ui.enabled=false", **spark_env}
    console_results = tmp / "the-console-has-no-results"
    console = {**base, "SPARK_RESULTS_URI": str(console_results), "SPARK_RESULTS_EXPORT_CHUNK_BYTES": str(CHUNK),
               "DJANGO_SUPERUSER_USERNAME": "admin", "DJANGO_SUPERUSER_PASSWORD": PASSWORD, "DEBUG": "true"}
    manage(console, "migrate", "--noinput")
    manage(console, "ensure_admin")
    manage(console, "shell", "-c", "from django.contrib.auth.models import Group, User; "
                                   "User.objects.create_user('watcher', password='pw').groups.add("
                                   "Group.objects.get(name='viewer'))")
    tokens = {user: manage(console, "create_api_token", user).split()[2] for user in ("admin", "watcher")}
    tokens["viewer"] = tokens.pop("watcher")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    port = free_port()
    with celery_worker(worker, tmp / "spark-worker.log", f"spark-results-{kind}-{tmp.name}@localhost", app,
                       queues="spark"):
        web = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                               cwd=ROOT, env=console, stdout=open(tmp / "web.log", "ab"), stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: http_up(f"{url}/login/"), timeout=120, what="the console to answer")
            yield Stack(kind, url, tokens, db_path, results_local, results_uri, console_results)
        finally:
            stop_process(web)


def test_search_and_trace_results_come_back_through_the_worker(stack: Stack, sdk_admin: AdminClient,
                                                              producer: Producer,
                                                              unique: Callable[[str], str]) -> None:
    topic = make_topic(sdk_admin, unique(f"Results-{stack.kind}"), "broker-a", queues=2)
    needle, key = unique("needle"), unique("traced-key")
    planted: dict[str, str] = {}
    for i in range(60):
        body = f"{needle} {i} " + "x" * 100 if i % 3 == 0 else f"plain {i}"
        sent = producer.send(Message(topic, body.encode(), keys=key if i == 4 else f"k{i}", tags="t"))
        if i % 3 == 0:
            planted[sent.offset_msg_id] = body
        if i == 4:
            traced = sent

    job = stack.api("POST", "/api/v1/search-jobs/", body={"topics": [topic], "body_contains": needle})["id"]
    state = stack.finished("search-jobs", job)
    assert state["summary"]["matched"] == state["summary"]["rows"] == len(planted) == 20

    # pages of rows from the worker: bodies for operators, none for viewers
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = stack.api("GET", f"/api/v1/search-jobs/{job}/results/?offset={offset}&limit=7")
        rows += page["results"]
        offset = page["next_offset"]
    assert {r["offset_msg_id"]: r["body_text"] for r in rows} == planted
    assert all(r["broker"] == "broker-a" and r["topic"] == topic for r in rows)
    seen = stack.api("GET", f"/api/v1/search-jobs/{job}/results/?offset=5&limit=50", role="viewer")["results"]
    assert [r["offset_msg_id"] for r in seen] == [r["offset_msg_id"] for r in rows[5:]]
    assert not any("body_text" in r or "body_base64" in r for r in seen)

    # where the files are: only the worker's results URI; the exports are those files, streamed in chunks
    files = stack.files(job)
    assert files["jsonl"] == f"{stack.results_uri}/{job}/results.jsonl"
    for fmt in ("jsonl", "csv"):
        on_disk = (stack.results_local / str(job) / f"results.{fmt}").read_bytes()
        assert len(on_disk) > 4 * CHUNK
        status, headers, body = stack.request("GET", f"/api/v1/search-jobs/{job}/export.{fmt}")
        assert status == 200 and body == on_disk and headers["Content-Length"] == str(len(on_disk))
    assert stack.request("GET", f"/api/v1/search-jobs/{job}/export.csv", role="viewer")[0] == 403

    trace_job = stack.api("POST", "/api/v1/trace-jobs/", body={"key": key})["id"]
    stack.finished("trace-jobs", trace_job)
    trace = stack.api("GET", f"/api/v1/trace-jobs/{trace_job}/results/", role="viewer")
    assert traced.msg_id in trace["ids"]
    assert ("stored", "broker-a") in {(s["type"], s["broker"]) for s in trace["timeline"]}
    assert [r["offset_msg_id"] for r in trace["records"]] == [traced.offset_msg_id]
    assert (stack.results_local / str(trace_job) / "trace.json").is_file()
    assert stack.files(trace_job)["trace"] == f"{stack.results_uri}/{trace_job}/trace.json"
    assert not stack.console_results.exists()
