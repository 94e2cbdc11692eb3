"""Search and trace jobs in the console: REST (spec checks, roles, paging, bodies per role, exports, cancel, a Redis
that cannot be reached, no spark worker answering) and the pages. Finished jobs are arranged as the worker leaves
them (a Job row + its result files) in a results directory that only a real ``celery worker -Q spark`` subprocess
knows (its ``SPARK_RESULTS_URI``): the console's own setting names another, never-created directory, so every
result the tests see came through the worker. The worker's real run path is tests/workers/test_spark_jobs.py, the
whole stack tests/workers/test_spark_results.py and the browser test tests/e2e/test_search_page.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from broker_core.client import Message, Producer
from console.models import AuditEvent, Job
from spark_jobs.output import ResultWriter
from tests.integration.cluster import Cluster, free_port
from tests.workers.conftest import spark_results_worker
from workers.celery import app

OFFSET_ID = "7F00000100002A9F0000000000000000"


@pytest.fixture(scope="module")
def worker_results(tmp_path_factory: pytest.TempPathFactory, redis_url: str, cluster: Cluster) -> Iterator[Path]:
    """The results directory of the module's spark worker (a real Celery worker process)."""
    tmp = tmp_path_factory.mktemp("search-jobs-worker")
    with spark_results_worker(tmp, redis_url, cluster.namesrv, str(tmp / "worker-results"), app):
        yield tmp / "worker-results"


@pytest.fixture(autouse=True)
def _console_results(settings, tmp_path: Path, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """The console on the worker's Redis, its own results setting naming a directory that never exists."""
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = redis_url
    settings.SPARK_RESULTS_URI = settings.SPARK_RESULTS_DIR = str(tmp_path / "the-console-has-no-results")


def _job_dir(results: Path, job: Job) -> Path:
    out = results / str(job.pk)
    shutil.rmtree(out, ignore_errors=True)  # job ids repeat across tests (rolled back): nothing stale
    out.mkdir(parents=True)
    return out


def _done_search(results: Path, rows: int = 7) -> Job:
    """A finished search as the worker leaves it: JSON lines, CSV and a row index (every 2nd row: pages seek)."""
    job = Job.objects.create(kind="spark.search", target="body_contains=x", status=Job.DONE,
                             finished=timezone.now(), params={"spec": {"body_contains": "x"}, "brokers": []},
                             progress=4, total=4)
    out = _job_dir(results, job)
    with ResultWriter(out / "results.jsonl", out / "results.csv", extra_columns=("broker",), index_every=2) as w:
        for i in range(rows):
            w.write({"topic": "T", "queue_id": 0, "queue_offset": i, "phy_offset": i * 100, "offset_msg_id": OFFSET_ID,
                     "keys": [f"k{i}"], "tags": "t", "store_timestamp": 1_700_000_000_000,
                     "body": f"x{i}".encode()}, broker="broker-a")
    (out / "results.index.json").write_text(json.dumps(w.row_index()))
    job.result = {"scanned": 100, "matched": rows + 3, "rows": rows, "truncated": True, "records_read": 120,
                  "bytes_scanned": 5000, "segments": 1, "elapsed_s": 0.5,
                  "files": {"jsonl": str(out / "results.jsonl"), "csv": str(out / "results.csv")},
                  "progress": {"fraction": 1.0, "tasks_done": 4, "tasks_total": 4, "stages": 1, "stages_done": 1,
                               "bytes_scanned": 5000, "bytes_total": 5000, "phase": "done"}}
    job.save()
    return job


def _done_trace(results: Path) -> Job:
    job = Job.objects.create(kind="spark.trace", target="ABC", status=Job.DONE, finished=timezone.now(),
                             params={"msg_id": "ABC", "key": None}, result={"steps": 3, "scanned": 10, "passes": 2})
    out = _job_dir(results, job)
    rec = {"offset_msg_id": OFFSET_ID, "segment": "0", "pos": 0}
    timeline = [
        {"type": "produced", "timestamp": 1_700_000_000_000, "msgId": "ABC", "depth": 0, "group": "", "topic": "T",
         "broker": "broker-a", "costMs": 0, "record": rec, "extra": {}},
        {"type": "retry", "timestamp": 1_700_000_000_100, "msgId": "ABC", "depth": 0, "group": "g1", "topic": "T",
         "broker": "broker-a", "costMs": 0, "record": rec, "extra": {"delayLevel": 3}, "delayLevel": 3,
         "delayMs": 900},
        {"type": "resent", "timestamp": 1_700_000_001_000, "msgId": "ABC", "depth": 0, "group": "g1", "topic": "T",
         "broker": "broker-a", "costMs": 12, "record": None, "extra": {"newMsgId": "DEF"}}]
    (out / "trace.json").write_text(json.dumps({"msg_id": "ABC", "ids": ["ABC", "DEF"], "timeline": timeline,
                                                "groups": {"g1": {"delivered": 1, "consumed": 0, "retries": [{}],
                                                                  "deadLettered": True, "resent": ["DEF"]}},
                                                "records": []}))
    return job


@pytest.mark.parametrize("spec, message", [
    ({"body_regex": "(unclosed"}, "body_regex: not a valid regular expression"),
    ({"body_regex_bytes": "[z-a]"}, "body_regex_bytes: not a valid regular expression"),
    ({"body_contains_hex": "zz"}, "body_contains_hex: not a hex string"),
    ({"body_contains": "a", "body_contains_hex": "61"}, "not both"),
    ({"json_path": "$", "json_equals": 1}, "json_path"),
    ({"json_path": "$.a"}, "json_path needs json_equals"),
    ({"begin_ms": 10, "end_ms": 5}, "end_ms is before begin_ms"),
    ({"topics": "notalist"}, "topics"),
    ({"limit": 0}, "limit"),
])
def test_bad_specs_are_400_with_a_clear_message(operator: APIClient, spec: dict[str, Any], message: str) -> None:
    resp = operator.post("/api/v1/search-jobs/", spec, format="json")
    assert resp.status_code == 400, resp.content
    assert message in resp.json()["detail"], resp.json()
    assert not Job.objects.filter(kind="spark.search").exists()


def test_start_roles_and_state(operator: APIClient, viewer: APIClient, nobody: APIClient) -> None:
    spec = {"topics": ["T"], "body_regex": r"order-\d+", "properties": {"region": "eu"}, "json_path": "$.a.b",
            "json_equals": {"x": [1, 2]}, "begin_ms": 1, "end_ms": 2}
    assert viewer.post("/api/v1/search-jobs/", spec, format="json").status_code == 403
    assert nobody.post("/api/v1/search-jobs/", spec, format="json").status_code == 403
    resp = operator.post("/api/v1/search-jobs/", spec, format="json")
    assert resp.status_code == 202, resp.content
    body = resp.json()
    assert body["status"] == "pending" and body["running"] is True and body["kind"] == "spark.search"
    job = Job.objects.get(pk=body["id"])
    assert job.params["spec"]["json_equals"] == {"x": [1, 2]} and job.params["spec"]["properties"] == {"region": "eu"}
    assert AuditEvent.objects.filter(action="spark.search").exists()
    got = viewer.get(f"/api/v1/search-jobs/{job.pk}/").json()
    assert got["status"] == "pending" and got["progress"]["percent"] == 0
    assert viewer.get(f"/api/v1/search-jobs/{job.pk}/results/").status_code == 409  # not done yet
    assert viewer.get(f"/api/v1/trace-jobs/{job.pk}/").status_code == 404  # a search is not a trace
    assert viewer.get("/api/v1/search-jobs/x1/").status_code == 404


def test_redis_down_fails_the_job_instead_of_a_5xx(operator: APIClient, settings,  # type: ignore[no-untyped-def]
                                                   django_capture_on_commit_callbacks) -> None:
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    with django_capture_on_commit_callbacks(execute=True):
        resp = operator.post("/api/v1/search-jobs/", {"body_contains": "x"}, format="json")
    assert resp.status_code == 202
    job = Job.objects.get(pk=resp.json()["id"])
    assert job.status == Job.FAILED and "could not queue" in job.result["error"]


def test_results_paging_bodies_per_role_and_exports(operator: APIClient, viewer: APIClient, worker_results: Path,
                                                    settings) -> None:  # type: ignore[no-untyped-def]
    job = _done_search(worker_results)
    page = operator.get(f"/api/v1/search-jobs/{job.pk}/results/?offset=2&limit=3").json()
    assert (page["count"], page["matched"], page["truncated"], page["next_offset"]) == (7, 10, True, 5)
    assert [r["queue_offset"] for r in page["results"]] == [2, 3, 4]
    assert page["results"][0]["broker"] == "broker-a" and page["results"][0]["body_text"] == "x2"
    last = viewer.get(f"/api/v1/search-jobs/{job.pk}/results/?offset=5&limit=50").json()
    assert [r["queue_offset"] for r in last["results"]] == [5, 6] and last["next_offset"] is None
    assert "body_text" not in last["results"][0] and "body_base64" not in last["results"][0]
    assert viewer.get(f"/api/v1/search-jobs/{job.pk}/results/?limit=0").status_code == 400
    state = viewer.get(f"/api/v1/search-jobs/{job.pk}/").json()
    assert state["progress"]["percent"] == 100 and state["summary"]["matched"] == 10 and "files" not in state["summary"]
    assert not Path(settings.SPARK_RESULTS_URI).exists()  # all of it came from the worker's own directory
    assert operator.get(f"/api/v1/search-jobs/{job.pk}/export.xml").status_code == 404
    assert viewer.get(f"/api/v1/search-jobs/{job.pk}/export.csv").status_code == 403


def test_exports_stream_the_workers_files_chunk_by_chunk(operator: APIClient, worker_results: Path,
                                                        settings) -> None:  # type: ignore[no-untyped-def]
    """Each export is the worker's file byte for byte, asked for 100 bytes at a time (several worker calls)."""
    settings.SPARK_RESULTS_EXPORT_CHUNK_BYTES = 100
    job = _done_search(worker_results, rows=40)
    for fmt, content_type in (("csv", "text/csv"), ("jsonl", "application/x-ndjson")):
        expected = (worker_results / str(job.pk) / f"results.{fmt}").read_bytes()
        assert len(expected) > 5 * 100
        resp = operator.get(f"/api/v1/search-jobs/{job.pk}/export.{fmt}")
        assert resp.status_code == 200 and resp.streaming and resp["Content-Type"] == content_type
        assert resp["Content-Length"] == str(len(expected))
        assert f'filename="search-{job.pk}.{fmt}"' in resp["Content-Disposition"]
        chunks = list(resp.streaming_content)
        assert b"".join(chunks) == expected and len(chunks) == -(-len(expected) // 100)
    assert b"".join(operator.get(f"/api/v1/search-jobs/{job.pk}/export.csv").streaming_content).startswith(
        b"broker,topic,")


def test_results_the_worker_does_not_have_are_404(operator: APIClient, worker_results: Path) -> None:
    search, trace = _done_search(worker_results), _done_trace(worker_results)
    shutil.rmtree(worker_results / str(search.pk))
    shutil.rmtree(worker_results / str(trace.pk))
    for path in (f"search-jobs/{search.pk}/results/", f"search-jobs/{search.pk}/export.csv",
                 f"trace-jobs/{trace.pk}/results/"):
        resp = operator.get(f"/api/v1/{path}")
        assert resp.status_code == 404 and "are gone" in resp.json()["detail"], (path, resp.content)


def test_no_spark_worker_answering_is_a_clear_504(operator: APIClient, worker_results: Path, redis_url: str,
                                                  settings) -> None:  # type: ignore[no-untyped-def]
    """Redis answers but no worker consumes this Redis database's ``spark`` queue: after the (short) timeout the
    API says so with a 504 and the pages show the job with the reason instead of the results."""
    search, trace = _done_search(worker_results), _done_trace(worker_results)
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = redis_url.rsplit("/", 1)[0] + "/15"
    settings.SPARK_RESULTS_TIMEOUT_S = 1
    for path in (f"search-jobs/{search.pk}/results/", f"search-jobs/{search.pk}/export.jsonl",
                 f"trace-jobs/{trace.pk}/results/"):
        resp = operator.get(f"/api/v1/{path}")
        assert resp.status_code == 504, (path, resp.content)
        body = resp.json()
        assert body["error"] == "spark_worker_timeout", body
        assert "no spark worker answered within 1 s" in body["detail"] and "'spark' queue" in body["detail"]
    admin = _page_client("operator")
    for url in (f"/search/jobs/{search.pk}/", f"/trace/jobs/{trace.pk}/"):
        html = admin.get(url)
        assert html.status_code == 504
        text = html.content.decode()
        assert 'data-testid="results-error"' in text and "no spark worker answered" in text
        assert 'data-testid="search-results"' not in text and 'data-testid="trace-lane"' not in text
    # Redis itself down: a 503 naming Celery's broker
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = f"redis://127.0.0.1:{free_port()}/0"
    resp = operator.get(f"/api/v1/search-jobs/{search.pk}/results/")
    assert resp.status_code == 503 and resp.json()["error"] == "celery_unavailable", resp.content


def test_cancel(operator: APIClient, viewer: APIClient, worker_results: Path) -> None:
    pending = Job.objects.create(kind="spark.search", target="t", params={"spec": {}})
    running = Job.objects.create(kind="spark.trace", target="t", status=Job.RUNNING, params={"key": "k"})
    assert viewer.post(f"/api/v1/search-jobs/{pending.pk}/cancel/").status_code == 403
    resp = operator.post(f"/api/v1/search-jobs/{pending.pk}/cancel/")
    assert resp.status_code == 200 and resp.json()["status"] == "cancelled" and resp.json()["running"] is False
    resp = operator.post(f"/api/v1/trace-jobs/{running.pk}/cancel/")
    assert resp.json()["status"] == "cancelling" and resp.json()["running"] is True
    done = _done_search(worker_results)
    resp = operator.post(f"/api/v1/search-jobs/{done.pk}/cancel/")
    assert resp.status_code == 409 and resp.json()["error"] == "job_ended"
    assert AuditEvent.objects.filter(action="spark.search.cancel").count() == 1


def test_trace_jobs(operator: APIClient, viewer: APIClient, worker_results: Path) -> None:
    assert operator.post("/api/v1/trace-jobs/", {}, format="json").status_code == 400
    assert viewer.post("/api/v1/trace-jobs/", {"msg_id": "ABC"}, format="json").status_code == 403
    resp = operator.post("/api/v1/trace-jobs/", {"key": "order-1", "begin_ms": 5}, format="json")
    assert resp.status_code == 202 and resp.json()["params"]["key"] == "order-1"
    job = _done_trace(worker_results)
    res = viewer.get(f"/api/v1/trace-jobs/{job.pk}/results/").json()
    assert [s["type"] for s in res["timeline"]] == ["produced", "retry", "resent"]
    assert res["groups"]["g1"]["deadLettered"] is True and res["ids"] == ["ABC", "DEF"]


def _page_client(role: str) -> Client:
    user = User.objects.create_user(f"page-{role}", password="pw")
    user.groups.add(Group.objects.get(name=role))
    c = Client()
    c.force_login(user)
    return c


def test_search_pages(worker_results: Path) -> None:
    op, viewer = _page_client("operator"), _page_client("viewer")
    page = viewer.get("/search/")
    assert page.status_code == 200 and b'data-testid="search-form"' not in page.content
    assert viewer.post("/search/", {"body": "x", "body_mode": "contains"}).status_code == 403
    bad = op.post("/search/", {"body": "(oops", "body_mode": "regex"})
    assert bad.status_code == 400 and b"not a valid regular expression" in bad.content
    ok = op.post("/search/", {"topics": "A, B", "body": "6f72", "body_mode": "contains_hex", "properties": "region=eu",
                              "json_path": "$.n", "json_value": "42"})
    assert ok.status_code == 302
    job = Job.objects.get(kind="spark.search")
    assert job.params["spec"]["topics"] == ["A", "B"] and job.params["spec"]["body_contains_hex"] == "6f72"
    assert job.params["spec"]["json_equals"] == 42 and job.params["spec"]["properties"] == {"region": "eu"}
    pending = op.get(ok["Location"])
    assert b'data-progress-url="/api/v1/search-jobs/' in pending.content and b"progress.js" in pending.content
    assert b'data-testid="cancel"' in pending.content
    done = _done_search(worker_results)
    html = viewer.get(f"/search/jobs/{done.pk}/").content.decode()
    assert "10 matched of 100 scanned" in html and f"/messages/{OFFSET_ID}/" in html and "progress.js" not in html
    # the body cell, not a bare "x3": the page's random CSRF token can hold those two characters
    assert "export.csv" not in html and "<code>x3</code>" not in html  # viewers: no bodies, no exports
    html = op.get(f"/search/jobs/{done.pk}/").content.decode()
    assert "export.csv" in html and "<code>x3</code>" in html
    assert op.get(f"/search/jobs/{done.pk}/export.jsonl").status_code == 200


def test_trace_pages(worker_results: Path) -> None:
    op, viewer = _page_client("operator"), _page_client("viewer")
    page = viewer.get("/trace/?key=order-1")
    assert page.status_code == 200 and b"give the topic" in page.content and b"full-trace" not in page.content
    page = op.get("/trace/?key=order-1")
    assert b'data-testid="full-trace"' in page.content
    ok = op.post("/trace/", {"key": "order-1"})
    assert ok.status_code == 302 and Job.objects.get(kind="spark.trace").params["key"] == "order-1"
    job = _done_trace(worker_results)
    html = viewer.get(f"/trace/jobs/{job.pk}/").content.decode()
    assert html.count('data-testid="trace-lane"') == 2 and 'data-type="retry"' in html
    assert "redelivered after 900 ms" in html and "cost 12 ms" in html and "?msg_id=DEF" in html
    assert "dead-lettered" in html and f"/messages/{OFFSET_ID}/" in html


def test_trace_page_answers_from_the_index_first(topic: str, cluster: Cluster) -> None:
    producer = Producer("trace-page-producers", cluster.namesrv).start()
    try:
        sent = producer.send(Message(topic, b"hello", keys="trace-page-key"))
    finally:
        producer.shutdown()
    op = _page_client("operator")
    html = op.get(f"/trace/?msg_id={sent.offset_msg_id}").content.decode()
    assert 'data-testid="trace-index"' in html and f"/messages/{sent.offset_msg_id}/" in html
    # the full scan follows the unique id (it survives retries, the DLQ and resends)
    assert f'name="msg_id" value="{sent.msg_id}"' in html
    html = op.get(f"/trace/?topic={topic}&key=trace-page-key").content.decode()
    assert sent.offset_msg_id in html and 'name="key" value="trace-page-key"' in html
    html = op.get("/trace/?msg_id=" + "0" * 32).content.decode()
    assert "The index has no answer" in html and 'data-testid="full-trace"' in html
    assert f'href="/trace/?msg_id={sent.offset_msg_id}"' in op.get(f"/messages/{sent.offset_msg_id}/").content.decode()
