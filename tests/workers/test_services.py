"""The job services in this process against real brokers and a real Redis (the lock), recording runs in
pytest-django's test database."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from broker_core.client import AdminClient, Message, MessageQueue, Producer, PullConsumer
from broker_core.codec.message_id import decode_offset_msg_id
from console.models import AuditEvent
from console.monitoring.models import JobRun, LagSample
from tests.integration.cluster import Cluster, free_port, wait_until
from tests.workers.conftest import make_topic, wait_flushed
from workers import schedule, services
from workers.locks import job_lock

pytestmark = pytest.mark.integration


def commit_log_files(cluster: Cluster, broker: str) -> list[str]:
    return sorted(p.name for p in (cluster.brokers[broker].store_dir / "commitlog").iterdir()
                  if p.name.isdigit())


def test_retention_deletes_the_expired_segments_and_records_counts(cluster: Cluster, sdk_admin: AdminClient,
                                                                   producer: Producer,
                                                                   unique: Callable[[str], str]):
    topic = make_topic(sdk_admin, unique("Aged"), "broker-r")
    sent = [producer.send(Message(topic, os.urandom(3072), keys=[f"k{i}"])) for i in range(80)]  # incompressible
    active = (decode_offset_msg_id(sent[-1].offset_msg_id)[2] // 65536) * 65536  # the last message's segment
    before = commit_log_files(cluster, "broker-r")
    assert len(before) >= 4 and f"{active:020d}" in before
    wait_flushed(sdk_admin, cluster, "broker-r")

    run = services.run_retention("broker-r")

    after = commit_log_files(cluster, "broker-r")
    assert run.outcome == JobRun.OK and run.error == ""
    # the oldest segments went, as many as the run says, and the active segment stays (fileReservedTime=0
    # expires every sealed one; the broker keeps a segment a reader still holds for the next pass)
    # by name: the allocator may have created the next segment meanwhile (it is in ``after``, not in ``before``)
    gone = [name for name in before if name not in after]
    assert run.counts["commit_log_files_deleted"] == len(gone) >= 2
    assert gone == before[:len(gone)] and f"{active:020d}" in after
    assert run.counts["bytes_freed"] >= 65536 * run.counts["commit_log_files_deleted"]
    assert run.counts["files_deleted"] >= run.counts["commit_log_files_deleted"]
    assert "time" in run.counts["triggers"] and run.counts["commit_log_min_offset"] == int(after[0])
    assert 0 <= run.counts["disk_ratio"] <= 1
    assert run.duration_ms >= 0 and run.finished >= run.started
    assert sdk_admin.topic_stats(topic)[0]["minOffset"] > 0  # the queue's min offset advanced

    again = services.run_retention("broker-r")  # repeatable: it deletes only what is still expired
    left = commit_log_files(cluster, "broker-r")
    assert again.outcome == JobRun.OK
    assert again.counts["commit_log_files_deleted"] == len([n for n in after if n not in left])
    assert f"{active:020d}" in left


def test_delay_delivery_delivers_only_when_asked(cluster: Cluster, sdk_admin: AdminClient, producer: Producer,
                                                 unique: Callable[[str], str]):
    topic = make_topic(sdk_admin, unique("Later"), "broker-a")
    addr = cluster.brokers["broker-a"].addr
    sent = producer.send(Message(topic, b"due soon", delay_level=1))
    wait_until(lambda: sdk_admin.delay_backlog(addr).get("1", {}).get("overdueMs", 0) > 0, timeout=30,
               what="the delayed message to be due")
    mq = MessageQueue(topic, "broker-a", 0)
    reader = PullConsumer("workers-test-reader", cluster.namesrv).start()
    try:
        assert reader.max_offset(mq) == 0  # due, yet not delivered: the broker's own tick is off

        run = services.run_delay_delivery("broker-a")

        assert run.outcome == JobRun.OK and run.counts["delivered"] >= 1
        assert run.counts["oldest_overdue_ms"] > 0 and run.counts["per_level"]["1"] >= 1
        got = reader.pull(mq, 0).messages
    finally:
        reader.shutdown()
    assert [m.msg_id for m in got] == [sent.msg_id] and got[0].body == b"due soon"


def test_disk_check_records_ratio_and_state(cluster: Cluster):
    run = services.run_disk_check("broker-a")
    assert 0 < run.counts["disk_ratio"] < 1 and run.counts["warning_ratio"] == 0.9
    assert run.counts["state"] == services.disk_state({**run.counts, "ratio": run.counts["disk_ratio"],
                                                       "clean_forcibly_ratio": 0.85, "max_used_ratio": 0.75})
    expect_ok = run.counts["disk_ratio"] < 0.9
    assert (run.outcome == JobRun.OK) == expect_ok


@pytest.mark.parametrize(("ratio", "full", "state"), [
    (0.30, False, "ok"), (0.80, False, "clean"), (0.86, False, "clean_forcibly"), (0.90, False, "full"),
    (0.91, True, "full"), (0.84, True, "full"), (-1.0, False, "unknown")])
def test_disk_states(ratio: float, full: bool, state: str):
    check = {"ratio": ratio, "disk_full": full, "warning_ratio": 0.9, "clean_forcibly_ratio": 0.85,
             "max_used_ratio": 0.75}
    assert services.disk_state(check) == state


def test_an_overlapping_run_of_the_same_job_and_broker_is_skipped():
    inner: list[JobRun] = []

    def body() -> tuple[dict[str, int], str]:
        inner.append(services.run_locked("retention", "broker-x", lambda: ({"never": 1}, "")))
        other = services.run_locked("retention", "broker-y", lambda: ({"ran": 1}, ""))  # another broker runs
        return {"other": other.pk}, ""

    outer = services.run_locked("retention", "broker-x", body)
    assert outer.outcome == JobRun.OK
    assert inner[0].outcome == JobRun.SKIPPED and "lock" in inner[0].error and inner[0].counts == {}
    assert JobRun.objects.get(pk=outer.counts["other"]).outcome == JobRun.OK
    assert services.run_locked("retention", "broker-x", lambda: ({}, "")).outcome == JobRun.OK  # released


def test_a_held_lock_skips_the_run_without_calling_the_broker(cluster: Cluster):
    with job_lock("disk_check", "broker-a") as held:
        assert held
        run = services.run_disk_check("broker-a")
    assert run.outcome == JobRun.SKIPPED and run.counts == {}


def test_a_broker_that_is_down_is_a_failed_run_and_the_error_propagates_for_retry():
    addr = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError):
        services.run_delay_delivery("broker-gone", addr)
    run = JobRun.objects.get(job="deliver_delayed", broker="broker-gone")
    assert run.outcome == JobRun.FAILED and "ConnectionError" in run.error and addr in run.error


def test_a_name_server_that_is_down_is_a_failed_run_of_the_beat_tick(settings):  # type: ignore[no-untyped-def]
    settings.BROKER_CORE_NAMESRV = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError):
        services.fan_out_targets(services.DISK_CHECK)
    run = JobRun.objects.get(job="disk_check", broker="")
    assert run.outcome == JobRun.FAILED and run.error.startswith("name server: ConnectionError")


def test_an_unknown_broker_is_a_failed_run_not_retried():
    run = services.run_disk_check("no-such-broker")
    assert run.outcome == JobRun.FAILED and "not registered" in run.error


def test_sampling_stores_lag_per_group_and_topic_and_prune_drops_old_samples(cluster: Cluster, sdk_admin: AdminClient,
                                                                        producer: Producer,
                                                                        unique: Callable[[str], str]):
    topic, group = make_topic(sdk_admin, unique("Lagging"), "broker-a"), unique("laggers")
    for i in range(3):
        producer.send(Message(topic, b"m%d" % i))
    c = PullConsumer(group, cluster.namesrv).start()
    try:
        c.commit_offset(MessageQueue(topic, "broker-a", 0), 1)
    finally:
        c.shutdown()
    AuditEvent.objects.create(action="group.reset_offset", target=f"{group}/{topic}", ok=True)  # how it's known
    old = LagSample.objects.create(timestamp=timezone.now() - timedelta(days=30), group=group, topic=topic, lag=9)

    run = services.run_sampling()

    assert run.outcome == JobRun.OK and run.broker == "" and run.counts["lag_samples"] >= 1
    sample = LagSample.objects.filter(group=group, topic=topic).latest("timestamp")
    assert (sample.lag, sample.dlq_size) == (2, 0)
    assert sample.lag_seconds is not None and sample.lag_seconds >= 0

    pruned = services.run_prune()
    assert pruned.outcome == JobRun.OK and pruned.counts["samples_pruned"] >= 1
    assert not LagSample.objects.filter(pk=old.pk).exists()


def test_runs_beyond_the_kept_number_are_pruned(settings):  # type: ignore[no-untyped-def]
    settings.WORKERS_JOB_RUNS_KEEP = 3
    ids = [services.run_locked("prune-me", "b", lambda i=i: ({"i": i}, "")).pk for i in range(5)]
    services.run_locked("prune-me", "other", lambda: ({}, ""))
    assert sorted(JobRun.objects.filter(job="prune-me", broker="b").values_list("id", flat=True)) == ids[-3:]
    assert JobRun.objects.filter(job="prune-me", broker="other").count() == 1
    run = services.run_prune()
    assert run.outcome == JobRun.OK and run.counts["runs_pruned"] == 0


def test_install_schedules_is_idempotent_and_keeps_operator_edits(capsys):  # type: ignore[no-untyped-def]
    call_command("install_schedules")
    assert "created" in capsys.readouterr().out
    rows = {t.name: t for t in PeriodicTask.objects.filter(name__startswith="broker_core: ")}
    assert {n: (t.task, t.interval.every, t.interval.period) for n, t in rows.items()} == {
        "broker_core: retention": ("workers.retention", 60, "seconds"),
        "broker_core: disk check": ("workers.disk_check", 10, "seconds"),
        "broker_core: delayed delivery": ("workers.deliver_delayed", 1, "seconds"),
        "broker_core: lag sampling": ("workers.sample_lag", 60, "seconds"),
        "broker_core: prune": ("workers.prune", 1, "hours"),
        "broker_core: controller sampling": ("workers.sample_controller", 10, "seconds"),
        "broker_core: alerts": ("workers.evaluate_alerts", 60, "seconds")}
    edited = rows["broker_core: disk check"]
    edited.interval, edited.enabled = IntervalSchedule.objects.create(every=30, period="seconds"), False
    edited.save()

    assert {what for _, what in schedule.install_schedules()} == {"kept"}
    again = PeriodicTask.objects.get(name="broker_core: disk check")
    assert (again.interval.every, again.enabled) == (30, False)
    assert PeriodicTask.objects.filter(name__startswith="broker_core: ").count() == len(schedule.ENTRIES)

    schedule.install_schedules(reset=True)
    again.refresh_from_db()
    assert (again.interval.every, again.enabled) == (10, True)


def test_every_entry_names_a_registered_task():
    from workers.celery import app

    app.loader.import_default_modules()  # what a worker does at start: autodiscovery of workers.tasks
    names = set(app.tasks)
    assert {e.task for e in schedule.ENTRIES} <= names
    assert schedule.beat_schedule()["broker_core: delayed delivery"] == {
        "task": "workers.deliver_delayed", "schedule": 1.0, "options": {"expires": 5}}
