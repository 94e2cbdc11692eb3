"""The DLQ list and resending dead letters as a background job."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from console.jobs import resend as jobs
from console.models import AuditEvent, Job
from tests.console.test_groups_dlq import _make_dead_letter
from tests.integration.cluster import Cluster


def test_dlq_list_counts_and_newest(cluster: Cluster, viewer: APIClient, topic: str,
                                    unique: Callable[[str], str]) -> None:
    group = unique("dlqlist")
    _make_dead_letter(cluster, topic, group)
    resp = viewer.get("/api/v1/dlq/")
    assert resp.status_code == 200, resp.json()
    rows = {r["group"]: r for r in resp.json()["results"]}
    assert rows[group]["topic"] == f"%DLQ%{group}" and rows[group]["count"] == 1
    assert rows[group]["newest"] and rows[group]["newest"].endswith("+00:00")
    assert all(r["topic"].startswith("%DLQ%") for r in rows.values())
    found = viewer.get("/api/v1/dlq/", {"search": group.upper()}).json()
    assert [r["group"] for r in found["results"]] == [group] and found["count"] == 1
    assert viewer.get("/api/v1/dlq/", {"search": "no-such-dlq-group-anywhere"}).json()["results"] == []


def test_jobs_unknown_ids_and_roles(viewer: APIClient, nobody: APIClient, operator: APIClient) -> None:
    job = Job.objects.create(kind="dlq.resend", target="g", total=1, params={"group": "g"})
    resp = viewer.get(f"/api/v1/jobs/{job.pk}/")
    assert resp.status_code == 200, resp.json()
    assert resp.json()["status"] == "pending" and resp.json()["progress"] == 0 and resp.json()["user"] is None
    assert nobody.get(f"/api/v1/jobs/{job.pk}/").status_code == 403
    assert APIClient().get(f"/api/v1/jobs/{job.pk}/").status_code == 401
    for bad in ("999999", "abc", "9" * 40):
        missing = viewer.get(f"/api/v1/jobs/{bad}/")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert viewer.post("/api/v1/dlq/g/resend/", {"offset_msg_ids": ["A" * 32], "async": True},
                       format="json").status_code == 403
    assert operator.post("/api/v1/dlq/bad$/resend/", {"offset_msg_ids": ["A" * 32], "async": True},
                         format="json").status_code == 400
    assert operator.post("/api/v1/dlq/g/resend/", {"offset_msg_ids": ["A" * 32], "async": "maybe"},
                         format="json").status_code == 400
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_async_resend_runs_as_a_job(cluster: Cluster, operator: APIClient, viewer: APIClient, topic: str,
                                    unique: Callable[[str], str], settings, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    # the job is published to a Redis database no worker reads; the test runs the worker's side in-process
    settings.CELERY_BROKER_URL = redis_url.rsplit("/", 1)[0] + "/4"
    group = unique("dlqjob")
    _make_dead_letter(cluster, topic, group)
    (dead,) = viewer.get(f"/api/v1/dlq/{group}/messages/").json()["results"]
    never_written = dead["offset_msg_id"][:16] + "00000000FFFFFFFF"  # the same broker, no message there

    resp = operator.post(f"/api/v1/dlq/{group}/resend/",
                         {"offset_msg_ids": [dead["offset_msg_id"], never_written], "async": True}, format="json")
    assert resp.status_code == 202, resp.json()
    job_id = resp.json()["id"]
    assert resp["Location"] == f"/api/v1/jobs/{job_id}/"
    assert resp.json()["kind"] == "dlq.resend" and resp.json()["total"] == 2 and resp.json()["user"] == "otto"
    assert resp.json()["status"] == "pending"
    started = AuditEvent.objects.get(action="dlq.resend", target=group)  # audited when it starts
    assert started.username == "otto" and started.after == {"job_id": job_id, "status": "pending"}

    assert jobs.run_resend_job(job_id, "test-worker@localhost")["status"] == "done"

    job = viewer.get(f"/api/v1/jobs/{job_id}/").json()
    assert job["status"] == "done" and job["progress"] == 2 and job["finished"] and job["retryable"]
    first, second = job["result"]["results"]
    assert first["offset_msg_id"] == dead["offset_msg_id"] and first["ok"] and first["topic"] == topic
    assert first["new_msg_id"] and not first["already_resent"] and second["ok"] is False and second["error"]
    event = AuditEvent.objects.get(action="dlq.resend.finish", target=group)
    assert event.username == "otto" and event.ok is False and event.before["job_id"] == job_id
    assert [r["ok"] for r in event.after["results"]] == [True, False]
    assert event.after["resent"] == 1 and event.after["failed"] == 1
    # a second run of the same task (a redelivery) does nothing
    assert jobs.run_resend_job(job_id, "test-worker@localhost")["status"] == "skipped"

    # the page offers a retry (one dead letter failed); the retry resends only what failed
    page = Client()
    page.force_login(User.objects.get(username="otto"))
    html = page.get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="job-retry"' in html and "failed" in html
    assert page.post(f"/jobs/{job_id}/retry/").status_code == 302
    assert Job.objects.get(pk=job_id).status == "pending"
    assert jobs.run_resend_job(job_id, "test-worker@localhost")["status"] == "done"
    again = Job.objects.get(pk=job_id).result["results"]
    assert again[0]["new_msg_id"] == first["new_msg_id"] and not again[0]["already_resent"]  # this job's own copy
    assert again[1]["ok"] is False
