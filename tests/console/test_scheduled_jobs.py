"""Scheduled jobs API and pages (rows from ``install_schedules``, hand-made runs), schedule edits (audited), the
run-now refusals, and the red disk banner. "Run now" reaching a real worker is in
``tests/workers/test_jobs_page.py``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from console.models import AuditEvent
from console.monitoring.models import BrokerSample, JobRun
from console.selectors.monitoring import disk_alerts, headline
from tests.integration.cluster import free_port
from workers.schedule import install_schedules

pytestmark = pytest.mark.integration


@pytest.fixture
def installed(db: None) -> None:
    install_schedules()


def _run(job: str, broker: str, outcome: str, ago_s: float, counts: dict | None = None,  # type: ignore[type-arg]
         error: str = "") -> JobRun:
    started = timezone.now() - timedelta(seconds=ago_s)
    return JobRun.objects.create(job=job, broker=broker, started=started, finished=started + timedelta(seconds=1),
                                 duration_ms=1000, outcome=outcome, counts=counts or {}, error=error)


def test_list_shows_every_job_with_schedule_and_last_runs(installed: None, viewer: APIClient):
    _run("retention", "broker-a", JobRun.OK, 120, {"files_deleted": 3, "bytes_freed": 4096})
    _run("retention", "broker-a", JobRun.FAILED, 60, error="ConnectionError: refused")
    resp = viewer.get("/api/v1/scheduled-jobs/")
    assert resp.status_code == 200
    jobs = {j["name"]: j for j in resp.json()["results"]}
    assert set(jobs) >= {"retention", "disk_check", "deliver_delayed", "sample_lag", "prune"}
    ret = jobs["retention"]
    assert (ret["task"], ret["enabled"], ret["schedule"]["text"]) == ("workers.retention", True, "every 60 seconds")
    assert [r["outcome"] for r in ret["last_runs"]] == ["failed", "ok"]
    assert ret["last_runs"][1]["counts"] == {"files_deleted": 3, "bytes_freed": 4096}
    assert ret["last_failure"]["error"] == "ConnectionError: refused"
    assert jobs["prune"]["schedule"]["text"] == "every 1 hour"


def test_runs_history_filters_and_404s(installed: None, viewer: APIClient):
    for i in range(3):
        _run("disk_check", "broker-a", JobRun.OK, 100 - i, {"disk_ratio": 0.5})
    _run("disk_check", "broker-b", JobRun.SKIPPED, 10)
    runs = viewer.get("/api/v1/scheduled-jobs/disk_check/runs/").json()["results"]
    assert [r["broker"] for r in runs] == ["broker-b", "broker-a", "broker-a", "broker-a"]
    only_a = viewer.get("/api/v1/scheduled-jobs/disk_check/runs/?broker=broker-a&limit=2").json()["results"]
    assert len(only_a) == 2 and {r["broker"] for r in only_a} == {"broker-a"}
    assert viewer.get("/api/v1/scheduled-jobs/disk_check/runs/?outcome=skipped").json()["count"] == 1
    assert viewer.get("/api/v1/scheduled-jobs/disk_check/runs/?outcome=bad").status_code == 400
    assert viewer.get("/api/v1/scheduled-jobs/nope/runs/").status_code == 404
    assert viewer.post("/api/v1/scheduled-jobs/nope/run/").status_code == 403


def test_operator_edits_interval_and_enabled_audited(installed: None, operator: APIClient, viewer: APIClient):
    assert viewer.patch("/api/v1/scheduled-jobs/retention/", {"enabled": False}, format="json").status_code == 403
    resp = operator.patch("/api/v1/scheduled-jobs/retention/", {"every": 5, "period": "minutes", "enabled": False},
                          format="json")
    assert resp.status_code == 200, resp.json()
    assert (resp.json()["schedule"]["text"], resp.json()["enabled"]) == ("every 5 minutes", False)
    task = PeriodicTask.objects.get(task="workers.retention")
    assert (task.interval.every, task.interval.period, task.enabled) == (5, "minutes", False)
    event = AuditEvent.objects.get(action="schedule.update")
    assert (event.target, event.username, event.before, event.after) == (
        "retention", "otto", {"enabled": True, "schedule": "every 60 seconds"},
        {"enabled": False, "schedule": "every 5 minutes"})
    assert operator.patch("/api/v1/scheduled-jobs/retention/", {"every": 0}, format="json").status_code == 400
    assert operator.patch("/api/v1/scheduled-jobs/retention/", {"period": "weeks"}, format="json").status_code == 400
    assert operator.patch("/api/v1/scheduled-jobs/nope/", {"enabled": True}, format="json").status_code == 404


def test_run_now_with_redis_down_is_a_503_and_audited_as_failed(installed: None, operator: APIClient,
                                                                viewer: APIClient, settings):  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    assert viewer.post("/api/v1/scheduled-jobs/retention/run/").status_code == 403
    resp = operator.post("/api/v1/scheduled-jobs/retention/run/")
    assert resp.status_code == 503, resp.json()
    assert AuditEvent.objects.get(action="schedule.run_now").ok is False
    assert operator.post("/api/v1/scheduled-jobs/nope/run/").status_code == 404


def test_schema_lists_the_scheduled_job_endpoints(viewer: APIClient):
    paths = viewer.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    assert {"/api/v1/scheduled-jobs/", "/api/v1/scheduled-jobs/{name}/runs/",
            "/api/v1/scheduled-jobs/{name}/run/"} <= set(paths)
    assert "post" in paths["/api/v1/scheduled-jobs/{name}/run/"]


def _page_client(role: str) -> Client:
    from django.contrib.auth.models import Group

    user = User.objects.create_user(f"page-{role}", password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def test_jobs_pages_show_runs_and_buttons_by_role(installed: None):
    _run("retention", "broker-a", JobRun.OK, 30, {"files_deleted": 2, "bytes_freed": 65536})
    _run("retention", "broker-a", JobRun.FAILED, 10, error="TimeoutError: <b>slow</b>")
    viewer, operator = _page_client("viewer"), _page_client("operator")
    page = viewer.get("/scheduled-jobs/").content.decode()
    assert "files_deleted=2" in page and "every 60 seconds" in page and "Run now" not in page
    assert "TimeoutError: &lt;b&gt;slow&lt;/b&gt;" in page
    assert 'data-testid="run-now-retention"' in operator.get("/scheduled-jobs/").content.decode()
    detail = operator.get("/scheduled-jobs/retention/?outcome=failed").content.decode()
    assert "TimeoutError" in detail and "files_deleted=2" not in detail and "Save schedule" in detail
    assert viewer.post("/scheduled-jobs/retention/schedule/", {"every": 30, "period": "seconds"}).status_code == 403
    resp = operator.post("/scheduled-jobs/retention/schedule/", {"every": 30, "period": "seconds"})
    assert resp.status_code == 302
    assert PeriodicTask.objects.get(task="workers.retention").enabled is False  # unchecked box = disabled
    assert operator.get("/scheduled-jobs/nope/").status_code == 404


def test_red_disk_banner_while_the_newest_reading_is_past_the_refusal_ratio(installed: None):
    viewer = _page_client("viewer")
    assert disk_alerts() == [] and "disk-banner" not in viewer.get("/scheduled-jobs/").content.decode()
    _run("disk_check", "broker-a", JobRun.OK, 300, {"disk_ratio": 0.95, "warning_ratio": 0.9})
    _run("disk_check", "broker-a", JobRun.FAILED, 200, {"disk_ratio": 0.912, "warning_ratio": 0.9}, error="full")
    _run("disk_check", "broker-a", JobRun.FAILED, 100, error="ConnectionError")  # no reading: ignored
    _run("disk_check", "broker-b", JobRun.OK, 100, {"disk_ratio": 0.4, "warning_ratio": 0.9})
    page = viewer.get("/scheduled-jobs/").content.decode()
    assert 'data-testid="disk-banner"' in page and "broker broker-a: 91.2% used" in page
    assert "broker-b" not in page.split('data-testid="disk-banner"')[1].split("</div>")[0]
    # a newer sample wins over the run; drops -> no banner, on every page
    BrokerSample.objects.create(timestamp=timezone.now() - timedelta(seconds=50), broker="broker-a", disk_ratio=0.5)
    assert disk_alerts() == []
    assert "disk-banner" not in viewer.get("/scheduled-jobs/").content.decode()
    BrokerSample.objects.create(timestamp=timezone.now(), broker="broker-b", disk_ratio=0.97)
    assert [a["broker"] for a in disk_alerts()] == ["broker-b"]
    assert "broker broker-b: 97.0% used" in viewer.get("/settings/").content.decode()


def test_run_headlines_show_ratios_as_percentages() -> None:
    assert headline({"state": "ok", "disk_ratio": 0.0991227, "files_deleted": 2, "other": 1}) == [
        ("files_deleted", 2), ("disk_ratio", "9.9%"), ("state", "ok")]
