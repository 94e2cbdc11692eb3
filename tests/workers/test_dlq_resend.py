"""DLQ resend jobs through real processes: a ``celery worker`` subprocess (solo pool) on a real redis-server, the
workers suite's real broker, and the job queued by a separate short-lived "web" process (``manage.py shell``,
gone before the job runs), all on one SQLite file that the test reads back with sqlite3.

The must-show: the worker is SIGKILLed mid-job, in the window between a send and its record (the test hook
``DLQ_RESEND_TEST_HANG_AFTER_CHUNKS`` makes it block there; the test waits until the broker holds those copies
and the database does not), then started again: the job resumes by itself and every dead letter is resent
exactly once, counted by reading the whole target topic back. Then a second job for the same dead letters
answers with the same new ids, and a forced one makes new copies.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, MessageExt, Producer, SimpleConsumer
from broker_core.codec.names import PROPERTY_ORIGIN_MESSAGE_ID
from tests.conftest import ROOT
from tests.integration.cluster import Cluster, read_topic, wait_until
from tests.workers.conftest import celery_worker, make_topic, manage, worker_env
from workers.celery import app

pytestmark = pytest.mark.integration
DEAD_LETTERS = 12
CHUNK = 4
HANG_AFTER_CHUNKS = 2  # chunk 1 recorded, chunk 2 sent but not recorded, chunk 3 untouched when killed


@dataclass
class Stack:
    env: dict[str, str]
    db_path: Path
    tmp: Path
    hostname: str

    def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db_path) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(sql, args).fetchall()]

    def job(self, job_id: int) -> dict[str, Any]:
        (row,) = self.rows("SELECT * FROM console_job WHERE id = ?", job_id)
        return {**row, "result": json.loads(row["result"]), "params": json.loads(row["params"])}

    def records(self, group: str) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM console_resendrecord WHERE \"group\" = ? ORDER BY offset_msg_id, generation",
                         group)

    def start_job(self, group: str, ids: list[str], force: bool = False) -> int:
        """Queue a resend job from a separate process that exits at once (the web process of the issue)."""
        code = ("from console.jobs.resend import start_resend_job\n"
                f"job = start_resend_job(None, {group!r}, {ids!r}, None, force={force!r})\n"
                "print('JOB', job.pk)\n")
        out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=self.env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return int(out.stdout.split("JOB")[-1].split()[0])

    def worker(self, log_name: str, extra_env: dict[str, str] | None = None) -> Any:
        return celery_worker({**self.env, **(extra_env or {})}, self.tmp / log_name, self.hostname, app)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, cluster: Cluster) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("resend")
    url = redis_url.rsplit("/", 1)[0] + "/3"  # a Redis database of its own: no other suite's worker takes these
    env = {**worker_env(url, cluster.namesrv, tmp / "console.sqlite3"), "DLQ_RESEND_CHUNK": str(CHUNK)}
    manage(env, "migrate", "--noinput")
    app.conf.update(broker_url=url, result_backend=url)
    yield Stack(env, tmp / "console.sqlite3", tmp, f"resend-{tmp.name}@localhost")


def make_dead_letters(cluster: Cluster, admin: AdminClient, producer: Producer, topic: str, group: str,
                      n: int) -> list[MessageExt]:
    """``n`` messages (each with its own key) dead-lettered by a SimpleConsumer that never acks them."""
    for i in range(n):
        producer.send(Message(topic, f"poison {i}".encode(), keys=f"{group}-k{i}"))
    consumer = SimpleConsumer(group, cluster.namesrv, max_reconsume_times=0).start()
    consumer.subscribe(topic)
    try:
        wait_until(lambda: consumer.receive(32, invisible_duration=1.0, wait=1.0) is not None
                   and len(admin.dead_letters(group)) >= n, timeout=60, what=f"{n} dead letters")
    finally:
        consumer.shutdown()
    dead = admin.dead_letters(group)
    assert len(dead) == n
    return dead


def copies(cluster: Cluster, topic: str, origins: set[str]) -> list[MessageExt]:
    """Every message of ``topic`` (read back in full) that is a resent copy of one of ``origins``."""
    return [m for m in read_topic(cluster.namesrv, topic, "resend-test-reader")
            if m.properties.get(PROPERTY_ORIGIN_MESSAGE_ID) in origins]


def test_worker_killed_between_send_and_record_resumes_and_resends_each_dead_letter_once(
        stack: Stack, cluster: Cluster, sdk_admin: AdminClient, producer: Producer,
        unique: Callable[[str], str]) -> None:
    topic = make_topic(sdk_admin, unique("Resend"), "broker-a", queues=2)
    group = unique("resend-g")
    dead = make_dead_letters(cluster, sdk_admin, producer, topic, group, DEAD_LETTERS)
    ids = [m.offset_msg_id for m in dead]
    origins = {m.msg_id for m in dead}
    assert copies(cluster, topic, origins) == []

    with stack.worker("worker-1.log", {"DLQ_RESEND_TEST_HANG_AFTER_CHUNKS": str(HANG_AFTER_CHUNKS)}) as first:
        job_id = stack.start_job(group, ids)
        # audited when it starts: the row was written with the job, by the web process
        (started,) = stack.rows("SELECT * FROM console_auditevent WHERE action = 'dlq.resend' AND target = ?", group)
        assert json.loads(started["after"])["job_id"] == job_id
        assert json.loads(started["before"])["offset_msg_ids"] == ids

        def in_the_window() -> bool:
            states = [r["state"] for r in stack.records(group)]
            return (len(copies(cluster, topic, origins)) == 2 * CHUNK and states.count("sent") == CHUNK
                    and states.count("intent") == CHUNK)

        wait_until(in_the_window, timeout=60, what="chunk 2 sent to the broker but not recorded")
        first.kill()  # SIGKILL
        first.wait()
    job = stack.job(job_id)
    assert job["status"] == "running" and job["progress"] == CHUNK and job["worker"].startswith(stack.hostname)
    unrecorded = {r["offset_msg_id"] for r in stack.records(group) if r["state"] == "intent"}
    assert unrecorded == set(ids[CHUNK:2 * CHUNK])

    with stack.worker("worker-2.log"):  # the same worker, started again: it resumes the job by itself
        wait_until(lambda: stack.job(job_id)["status"] == "done", timeout=120, what="the resumed job to finish")
        job = stack.job(job_id)
        results = job["result"]["results"]
        assert job["progress"] == DEAD_LETTERS and [r["offset_msg_id"] for r in results] == ids
        assert all(r["ok"] and not r["already_resent"] for r in results), results
        assert {r["offset_msg_id"] for r in results if r["recovered"]} == unrecorded  # found, not sent again
        got = copies(cluster, topic, origins)
        per_origin = {o: [m.msg_id for m in got if m.properties[PROPERTY_ORIGIN_MESSAGE_ID] == o] for o in origins}
        assert all(len(v) == 1 for v in per_origin.values()), per_origin  # each dead letter resent exactly once
        by_dead = {m.offset_msg_id: m.msg_id for m in dead}
        assert {r["offset_msg_id"]: r["new_msg_id"] for r in results} == {
            oid: per_origin[by_dead[oid]][0] for oid in ids}
        (finished,) = stack.rows("SELECT * FROM console_auditevent WHERE action = 'dlq.resend.finish' AND "
                                 "target = ?", group)
        assert finished["ok"] and json.loads(finished["after"])["recovered"] == CHUNK

        # idempotent: the same dead letters again answer with the same new ids, nothing is sent
        again = stack.start_job(group, ids)
        wait_until(lambda: stack.job(again)["status"] == "done", timeout=60, what="the second job")
        second = stack.job(again)["result"]["results"]
        assert all(r["ok"] and r["already_resent"] for r in second)
        assert [r["new_msg_id"] for r in second] == [r["new_msg_id"] for r in results]
        assert len(copies(cluster, topic, origins)) == DEAD_LETTERS

        # forced: new copies, a second generation
        forced = stack.start_job(group, ids[:2], force=True)
        wait_until(lambda: stack.job(forced)["status"] == "done", timeout=60, what="the forced job")
        third = stack.job(forced)["result"]["results"]
        assert all(r["ok"] and not r["already_resent"] and r["generation"] == 2 for r in third)
        assert {r["new_msg_id"] for r in third}.isdisjoint(r["new_msg_id"] for r in results)
        assert len(copies(cluster, topic, origins)) == DEAD_LETTERS + 2
