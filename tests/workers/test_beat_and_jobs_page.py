"""The whole scheduled path with real processes on one SQLite file: ``celery beat`` (django-celery-beat's
``DatabaseScheduler``, entries from ``install_schedules``), a ``celery worker`` (solo pool), the console
(``manage.py runserver``) and real brokers, Redis as Celery's broker.

- Delayed messages at levels 1-4 sent through the REST API are delivered by the beat-driven task (broker-a has
  no delay tick of its own: ``scheduleDeliverIntervalMs=0``) within a tick of being due; with beat stopped
  for longer than every level and restarted, every overdue message is delivered exactly once.
- The jobs page in headless Chromium shows the runs beat caused, and "Run now" makes the worker run a job.

Only the delayed-delivery entry stays enabled (the others would add load and noise); "run now" works on a
disabled job too, as the jobs page says nothing against it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from broker_core.client import AdminClient, MessageQueue, PullConsumer
from tests.conftest import ROOT
from tests.e2e.conftest import ARTIFACTS, browser, log_in  # noqa: F401 - browser: the headless Chromium fixture
from tests.integration.cluster import Cluster, free_port, http_up, stop_process, wait_until
from tests.workers.conftest import CELERY, LEVELS_MS, celery_worker, make_topic, manage, worker_env
from workers.celery import app

pytestmark = pytest.mark.integration
PASSWORD = "beat-and-jobs-pw"
TICK_S = 1.0  # the delayed-delivery entry's interval
# "Beat stopped for a minute", as the issue says: every message sent meanwhile (levels 1-4 are 100-400 ms on
# this broker) is overdue by most of that minute when beat restarts. The minute passes on the broker's clock
# (clockOffsetMs moved forward through UPDATE_BROKER_CONFIG), not on the test's.
BEAT_STOP_S = 60.0
QUIET_S = 2.0  # real time beat stays stopped after the jump, for a delivery that should not happen to show


@dataclass
class Stack:
    env: dict[str, str]
    tmp: Path
    db_path: Path
    base_url: str
    token: str
    redis_url: str
    hostname: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)  # type: ignore[type-arg]

    def start_beat(self) -> None:
        log = open(self.tmp / "beat.log", "ab")
        self.procs["beat"] = subprocess.Popen(
            [CELERY, "-A", "workers.celery", "beat", "-l", "info", "--pidfile=", "-s", str(self.tmp / "beat-schedule")],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def stop_beat(self) -> None:
        stop_process(self.procs.pop("beat"))

    def drain(self) -> None:
        """Wait until no task beat queued is left: the Redis queue is empty and the worker holds none (neither
        running nor prefetched). Tasks past their ``expires`` are revoked as the worker takes them."""
        queue = redis.Redis.from_url(self.redis_url)
        inspect = app.control.inspect(destination=[self.hostname], timeout=2)

        def idle() -> bool:
            if queue.llen("celery"):
                return False
            active, reserved = inspect.active() or {}, inspect.reserved() or {}
            # a worker that did not answer counts as busy
            return active.get(self.hostname, [None]) == [] and reserved.get(self.hostname, [None]) == []

        wait_until(idle, timeout=30, what="the worker to run or revoke every queued task")

    def runs(self, job: str, broker: str) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db_path, timeout=30) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM monitoring_jobrun WHERE job = ? AND broker = ? ORDER BY id",
                              (job, broker)).fetchall()
        return [{**dict(r), "counts": json.loads(r["counts"])} for r in rows]

    def api(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(f"{self.base_url}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, cluster: Cluster) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("beat-stack")
    db_path = tmp / "console.sqlite3"
    env = {**worker_env(redis_url, cluster.namesrv, db_path), "DJANGO_SUPERUSER_USERNAME": "admin",
           "DJANGO_SUPERUSER_PASSWORD": PASSWORD, "DEBUG": "true"}
    manage(env, "migrate", "--noinput")
    manage(env, "ensure_admin")
    manage(env, "install_schedules")
    token = manage(env, "create_api_token", "admin").split()[2]
    with sqlite3.connect(db_path) as db:  # only the delayed delivery runs on beat's clock in this module
        db.execute("UPDATE django_celery_beat_periodictask SET enabled = 0 WHERE task LIKE 'workers.%' "
                   "AND task != 'workers.deliver_delayed'")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    port = free_port()
    hostname = f"beat-stack-{tmp.name}@localhost"
    s = Stack(env, tmp, db_path, f"http://127.0.0.1:{port}", token, redis_url, hostname)
    with celery_worker(env, tmp / "worker.log", hostname, app):
        s.procs["web"] = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=ROOT, env=env,
            stdout=open(tmp / "web.log", "ab"), stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: http_up(f"{s.base_url}/login/"), timeout=120, what="the console to answer")
            yield s
        finally:
            for proc in reversed(list(s.procs.values())):
                stop_process(proc)


def _delivered(cluster: Cluster, topic: str) -> list[Any]:
    c = PullConsumer("beat-test-reader", cluster.namesrv)
    try:
        mq, out, offset = MessageQueue(topic, "broker-a", 0), [], 0
        while True:
            res = c.pull(mq, offset, max_nums=64)
            out += res.messages
            if not res.messages or res.next_begin_offset == offset:
                return out
            offset = res.next_begin_offset
    finally:
        c.shutdown()


def _due_ms(admin: AdminClient, offset_msg_id: str, level: int) -> int:
    """When a delayed message became due: its SCHEDULE_TOPIC_XXXX record's store time plus its level's delay."""
    return admin.view_message(offset_msg_id).store_timestamp + LEVELS_MS[level - 1]


def _ms(sqlite_time: str) -> int:
    return int(datetime.fromisoformat(sqlite_time).replace(tzinfo=UTC).timestamp() * 1000)


def _level(key: str) -> int:
    return int(key.split("-L")[1].split("-")[0])


def _send_levels(stack: Stack, topic: str, tag: str) -> dict[str, str]:
    """Four messages at each of levels 1-4 through the REST API: ``{key: offset id of the stored record}``."""
    keys = [f"{tag}-L{level}-{i}" for level in (1, 2, 3, 4) for i in range(4)]
    body = {"messages": [{"body": k, "keys": [k], "delay_level": _level(k)} for k in keys]}
    results = stack.api("POST", f"/api/v1/topics/{topic}/messages/", body)["results"]
    assert len(results) == len(keys)
    return {k: r["offset_msg_id"] for k, r in zip(keys, results, strict=True)}


def test_beat_delivers_delayed_levels_within_a_tick_and_after_a_stop_each_overdue_message_once(
        stack: Stack, cluster: Cluster, sdk_admin: AdminClient, unique: Callable[[str], str]):
    topic = make_topic(sdk_admin, unique("Delayed"), "broker-a")
    stack.start_beat()
    first = _send_levels(stack, topic, "run")
    wait_until(lambda: len(_delivered(cluster, topic)) >= len(first), timeout=90,
               what="beat-driven delivery of the first 16 delayed messages")
    got = _delivered(cluster, topic)
    assert sorted(m.properties["KEYS"] for m in got) == sorted(first)
    # "within one tick": each message was delivered by the first delivery run that started once it was due
    # (an ordering of events, not a speed threshold); the figures are printed for the notes. A run's row is
    # written when it finishes, after its messages are visible: wait for the rows of the runs that delivered.
    due_at = {m.properties["KEYS"]: _due_ms(sdk_admin, first[m.properties["KEYS"]], _level(m.properties["KEYS"]))
              for m in got}

    def runs_now() -> list[tuple[int, int]]:
        return [(_ms(r["started"]), _ms(r["finished"])) for r in stack.runs("deliver_delayed", "broker-a")]

    wait_until(lambda: all(any(r[0] >= due for r in runs_now()) for due in due_at.values()), timeout=30,
               what="the delivery runs' rows")
    runs = runs_now()
    late_s = []
    for m in got:
        key = m.properties["KEYS"]
        due = due_at[key]
        first_after_due = min((r for r in runs if r[0] >= due), default=None)
        assert first_after_due is not None and m.store_timestamp <= first_after_due[1] + 1, (
            key, due, m.store_timestamp, first_after_due)  # +1: millisecond rounding
        late_s.append((m.store_timestamp - due) / 1000)
    print(f"delivery after due: max {max(late_s):.2f} s, mean {sum(late_s) / len(late_s):.2f} s (tick {TICK_S} s)")

    stack.stop_beat()
    stack.drain()  # no delivery task beat queued before it stopped is left to run later
    runs_before = len(stack.runs("deliver_delayed", "broker-a"))
    second = _send_levels(stack, topic, "stopped")
    broker_a = cluster.brokers["broker-a"].addr
    sdk_admin.update_broker_config(broker_a, {"clockOffsetMs": str(int(BEAT_STOP_S * 1000))})
    time.sleep(QUIET_S)
    assert len(_delivered(cluster, topic)) == len(first), "nothing may deliver while beat is stopped"
    assert len(stack.runs("deliver_delayed", "broker-a")) == runs_before
    backlog = sdk_admin.delay_backlog(broker_a)
    assert sum(v["waiting"] for v in backlog.values()) == len(second), backlog
    assert all(v["overdueMs"] > 0 for v in backlog.values() if v["waiting"]), backlog

    stack.start_beat()
    wait_until(lambda: len(_delivered(cluster, topic)) >= len(first) + len(second), timeout=90,
               what="every overdue message after beat restarts")
    runs_at_catch_up = len(stack.runs("deliver_delayed", "broker-a"))
    wait_until(lambda: len(stack.runs("deliver_delayed", "broker-a")) >= runs_at_catch_up + 3, timeout=60,
               what="three more delivery ticks (a duplicate would show up in them)")
    keys = [m.properties["KEYS"] for m in _delivered(cluster, topic)]
    assert sorted(keys) == sorted([*first, *second])  # each exactly once
    runs = stack.runs("deliver_delayed", "broker-a")[runs_before:]
    assert sum(r["counts"].get("delivered", 0) for r in runs) == len(second)
    assert max(r["counts"].get("oldest_overdue_ms", 0) for r in runs) >= BEAT_STOP_S * 1000 - 500


def test_jobs_page_shows_runs_and_run_now_makes_the_worker_run_the_job(stack: Stack, browser):  # type: ignore[no-untyped-def] # noqa: F811
    from playwright.sync_api import expect

    if "beat" not in stack.procs:
        stack.start_beat()
    wait_until(lambda: len(stack.runs("deliver_delayed", "broker-a")) > 0, timeout=60, what="a beat-driven run")
    assert stack.runs("disk_check", "broker-a") == []  # disabled in this module: only "run now" runs it
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        log_in(page, stack.base_url, "admin", PASSWORD)
        page.get_by_role("link", name="Jobs").click()
        row = page.locator("tr[data-job=deliver_delayed]")
        expect(row).to_contain_text("every 1 second")
        expect(row.get_by_test_id("last-runs")).to_contain_text("broker-a")
        expect(page.locator("tr[data-job=disk_check]")).to_contain_text("no runs yet")

        page.get_by_test_id("run-now-disk_check").click()
        expect(page.locator(".flash")).to_contain_text("workers.disk_check")
        wait_until(lambda: len(stack.runs("disk_check", "broker-a")) > 0 and
                   len(stack.runs("disk_check", "broker-r")) > 0, timeout=60, what="the run-now disk checks")
        page.reload()
        cell = page.locator("tr[data-job=disk_check]").get_by_test_id("last-runs")
        expect(cell).to_contain_text("disk_ratio=")
        expect(cell).to_contain_text("broker-r")
        page.locator("tr[data-job=disk_check] a").first.click()
        expect(page.get_by_test_id("job-runs")).to_contain_text("state=ok")
        page.screenshot(path=str(stack.tmp / "jobs.png"), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)
        page.goto(f"{stack.base_url}/scheduled-jobs/")
        page.screenshot(path=str(ARTIFACTS / "scheduled-jobs.png"), full_page=True)
    finally:
        context.close()
    assert os.path.exists(stack.tmp / "jobs.png")
