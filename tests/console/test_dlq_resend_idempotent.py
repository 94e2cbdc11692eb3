"""Idempotent DLQ resends against the console suite's real broker, in-process (the worker's side of a job is
:func:`console.jobs.resend.run_resend_job`, called here as the Celery task calls it; the real-worker, SIGKILL and
resume test is ``tests/workers/test_dlq_resend.py``).

- A dead letter resent once answers with its earlier copy (``already_resent``) on the sync API and in jobs;
  ``force`` makes a new copy (the next generation).
- An intent whose send was never recorded (what a killed process leaves) is settled on the broker: the copy is
  found, by key or, for a dead letter without keys, by reading the topic from the intent's time, and adopted;
  nothing is sent again. With no copy there, it is sent.
- A job whose run stopped renewing its lease is ``stale``, can be retried from the API, and the retry finishes it;
  a live run's job is ``busy`` for another delivery.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from broker_core.client import AdminClient, Message, MessageExt, Producer, SimpleConsumer
from console.jobs import resend as jobs
from console.jobs import resend_lease
from console.jobs.models import Job, ResendRecord
from console.jobs.resend_records import LeaseLost, resend_chunk
from console.models import AuditEvent
from tests.integration.cluster import Cluster, read_topic, wait_until

pytestmark = pytest.mark.integration


def dead_letter(cluster: Cluster, admin: AdminClient, topic: str, group: str, keys: str | None) -> MessageExt:
    """One message dead-lettered by a SimpleConsumer of ``group`` that never acks it."""
    with Producer(group + "-p", cluster.namesrv) as producer:
        producer.send(Message(topic, b"poison", keys=keys))
    consumer = SimpleConsumer(group, cluster.namesrv, max_reconsume_times=0).start()
    consumer.subscribe(topic)
    try:
        wait_until(lambda: consumer.receive(16, invisible_duration=1.0, wait=1.0) is not None
                   and bool(admin.dead_letters(group)), timeout=30, what="the dead letter")
    finally:
        consumer.shutdown()
    (dead,) = admin.dead_letters(group)
    return dead


def resent_copies(cluster: Cluster, topic: str, dead: MessageExt) -> list[str]:
    """Unique ids of the copies of ``dead`` in ``topic``, reading every queue of the topic in full."""
    return sorted(m.msg_id for m in read_topic(cluster.namesrv, topic, f"idem-reader-{os.getpid()}")
                  if m.properties.get("ORIGIN_MESSAGE_ID") == dead.msg_id)


def resend(client: APIClient, group: str, ids: list[str], **extra: object) -> list[dict[str, object]]:
    resp = client.post(f"/api/v1/dlq/{group}/resend/", {"offset_msg_ids": ids, **extra}, format="json")
    assert resp.status_code == 200, resp.json()
    return resp.json()["results"]


def test_a_second_resend_answers_with_the_earlier_copy_unless_forced(
        cluster: Cluster, sdk_admin: AdminClient, operator: APIClient, topic: str,
        unique: Callable[[str], str]) -> None:
    group = unique("idem")
    dead = dead_letter(cluster, sdk_admin, topic, group, keys=unique("k"))

    (first,) = resend(operator, group, [dead.offset_msg_id])
    assert first["ok"] and not first["already_resent"] and first["generation"] == 1 and first["topic"] == topic
    (again,) = resend(operator, group, [dead.offset_msg_id])
    assert again["ok"] and again["already_resent"] and again["new_msg_id"] == first["new_msg_id"]
    assert again["new_offset_msg_id"] == first["new_offset_msg_id"]
    assert resent_copies(cluster, topic, dead) == [first["new_msg_id"]]

    (forced,) = resend(operator, group, [dead.offset_msg_id], force=True)
    assert forced["ok"] and not forced["already_resent"] and forced["generation"] == 2
    assert forced["new_msg_id"] != first["new_msg_id"]
    assert resent_copies(cluster, topic, dead) == sorted([first["new_msg_id"], forced["new_msg_id"]])
    # a job (not forced) for the same dead letter answers with the newest copy and sends nothing
    job = jobs.start_resend_job(None, group, [dead.offset_msg_id], None)
    assert jobs.run_resend_job(job.pk, "test@localhost")["status"] == "done"
    job.refresh_from_db()
    (in_job,) = job.result["results"]
    assert in_job["already_resent"] and in_job["new_msg_id"] == forced["new_msg_id"]
    assert len(resent_copies(cluster, topic, dead)) == 2
    assert [e.before["force"] for e in AuditEvent.objects.filter(action="dlq.resend", target=group)
            .order_by("id")] == [False, False, True, False]


@pytest.mark.parametrize("with_keys", [True, False], ids=["by-key", "keyless-scan"])
def test_an_unrecorded_send_is_found_on_the_broker_not_sent_again(
        with_keys: bool, cluster: Cluster, sdk_admin: AdminClient, operator: APIClient, topic: str,
        unique: Callable[[str], str]) -> None:
    group = unique("window")
    dead = dead_letter(cluster, sdk_admin, topic, group, keys=unique("k") if with_keys else None)
    assert bool(dead.keys) == with_keys
    long_ago = timezone.now() - resend_lease.lease() - timedelta(seconds=1)
    # what a process killed between the send and its record leaves: an intent (from a dead web request, its
    # claim older than the lease) and the copy on the broker
    rec = ResendRecord.objects.create(group=group, offset_msg_id=dead.offset_msg_id, topic=topic,
                                      origin_msg_id=dead.msg_id, keys=" ".join(dead.keys),
                                      intent_at=timezone.now(), claimed_at=long_ago)
    (copy,) = sdk_admin.resend_dead_letters(group, [dead.offset_msg_id])
    assert copy["ok"]

    (result,) = resend(operator, group, [dead.offset_msg_id])

    assert result["ok"] and result["recovered"] and result["new_msg_id"] == copy["newMsgId"]
    assert result["new_offset_msg_id"] == copy["newOffsetMsgId"]
    rec.refresh_from_db()
    assert (rec.state, rec.new_msg_id, rec.recovered) == (ResendRecord.SENT, copy["newMsgId"], True)
    assert resent_copies(cluster, topic, dead) == [copy["newMsgId"]]


def test_an_intent_with_no_copy_is_sent_and_a_live_one_is_left_alone(
        cluster: Cluster, sdk_admin: AdminClient, operator: APIClient, topic: str,
        unique: Callable[[str], str]) -> None:
    group = unique("nocopy")
    dead = dead_letter(cluster, sdk_admin, topic, group, keys=unique("k"))
    now = timezone.now()
    rec = ResendRecord.objects.create(group=group, offset_msg_id=dead.offset_msg_id, topic=topic,
                                      origin_msg_id=dead.msg_id, keys=" ".join(dead.keys), intent_at=now,
                                      claimed_at=now)
    (busy,) = resend(operator, group, [dead.offset_msg_id])  # someone is sending it right now
    assert busy["ok"] is False and "being resent" in str(busy["error"])
    assert resent_copies(cluster, topic, dead) == []

    ResendRecord.objects.filter(pk=rec.pk).update(claimed_at=now - resend_lease.lease() - timedelta(seconds=1))
    (sent,) = resend(operator, group, [dead.offset_msg_id])
    assert sent["ok"] and not sent["recovered"] and not sent["already_resent"]
    assert resent_copies(cluster, topic, dead) == [sent["new_msg_id"]]


def test_a_stale_job_is_retried_from_the_api_and_finishes(
        cluster: Cluster, sdk_admin: AdminClient, operator: APIClient, viewer: APIClient, topic: str,
        unique: Callable[[str], str]) -> None:
    group = unique("stale")
    dead = dead_letter(cluster, sdk_admin, topic, group, keys=unique("k"))
    job = jobs.start_resend_job(None, group, [dead.offset_msg_id], None)
    assert resend_lease.claim(job.pk, "gone@host:1:x")  # a run that will die without renewing
    assert jobs.run_resend_job(job.pk, "other@host")["status"] == "busy"  # its lease is live
    assert viewer.get(f"/api/v1/jobs/{job.pk}/").json()["stale"] is False
    assert operator.post(f"/api/v1/jobs/{job.pk}/retry/").status_code == 409

    Job.objects.filter(pk=job.pk).update(heartbeat=timezone.now() - resend_lease.lease() - timedelta(seconds=1))
    shown = viewer.get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["status"] == "running" and shown["stale"] and shown["retryable"] and shown["worker"] == "gone@host:1:x"
    assert viewer.post(f"/api/v1/jobs/{job.pk}/retry/").status_code == 403
    retried = operator.post(f"/api/v1/jobs/{job.pk}/retry/")
    assert retried.status_code == 202, retried.json()
    assert AuditEvent.objects.filter(action="dlq.resend.retry", target=group, username="otto").count() == 1

    assert jobs.run_resend_job(job.pk, "w2@host")["status"] == "done"  # the retry's delivery
    assert not resend_lease.renew(job.pk, "gone@host:1:x")  # the dead run could not write any more
    done = viewer.get(f"/api/v1/jobs/{job.pk}/").json()
    assert done["status"] == "done" and done["progress"] == 1 and not done["retryable"]
    assert done["result"]["results"][0]["ok"] and len(resent_copies(cluster, topic, dead)) == 1
    assert operator.post(f"/api/v1/jobs/{job.pk}/retry/").status_code == 409  # nothing left to retry


def test_a_run_that_lost_its_lease_sends_nothing(cluster: Cluster, sdk_admin: AdminClient, topic: str,
                                                 unique: Callable[[str], str]) -> None:
    group = unique("lost")
    dead = dead_letter(cluster, sdk_admin, topic, group, keys=unique("k"))
    with pytest.raises(LeaseLost):
        resend_chunk(group, [dead.offset_msg_id], None, keep_lease=lambda: False)
    assert resent_copies(cluster, topic, dead) == []
    (rec,) = ResendRecord.objects.filter(group=group)
    assert rec.state == ResendRecord.INTENT  # the next attempt settles it on the broker
