"""Must show: a lag alert fires to a test webhook receiver when a group falls behind and resolves when it
catches up. Real broker and name server, the real sampling service, a real HTTP receiver (``http.server`` on a
port the OS picks); once in-process (sampling and evaluation services on the test database), and once through a
real ``celery worker`` subprocess on a real redis-server (``workers.sample_lag`` then
``workers.evaluate_alerts`` with ``.delay()``), which records into its own SQLite file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, MessageQueue, Producer, PullConsumer
from console.alerts.models import Alert, AlertRule
from console.alerts.services import evaluate
from console.models import AuditEvent
from console.monitoring.models import JobRun, LagSample
from tests.console.test_alerts import WebhookReceiver
from tests.integration.cluster import Cluster, wait_until
from tests.workers.conftest import celery_worker, make_topic, manage, worker_env
from workers import services, tasks
from workers.celery import app

pytestmark = pytest.mark.integration
RESULT_TIMEOUT_S = 60


@pytest.fixture
def hook(settings: Any) -> Iterator[WebhookReceiver]:
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the receiver is local (refused by default)
    r = WebhookReceiver()
    yield r
    r.close()


class Group:
    """A consumer group on a one-queue topic of broker-a that commits offsets by hand."""

    def __init__(self, cluster: Cluster, producer: Producer, topic: str, name: str) -> None:
        self.topic, self.name, self.producer = topic, name, producer
        self.mq = MessageQueue(topic, "broker-a", 0)
        self.consumer = PullConsumer(name, cluster.namesrv).start()

    def produce(self, n: int) -> None:
        for i in range(n):
            self.producer.send(Message(self.topic, b"order %d" % i))

    def catch_up(self) -> int:
        """Consume everything there is and commit it; returns how many messages were consumed."""
        offset, consumed = max(self.consumer.committed_offset(self.mq), 0), 0
        while offset < self.consumer.max_offset(self.mq):
            result = self.consumer.pull(self.mq, offset)
            consumed += len(result.messages)
            offset = result.next_begin_offset
        self.consumer.commit_offset(self.mq, offset)
        return consumed

    def close(self) -> None:
        self.consumer.shutdown()


@pytest.fixture
def group(cluster: Cluster, sdk_admin: AdminClient, producer: Producer,
          unique: Callable[[str], str]) -> Iterator[Group]:
    g = Group(cluster, producer, make_topic(sdk_admin, unique("Orders"), "broker-a"), unique("billing"))
    g.produce(2)
    g.catch_up()  # the group exists with committed offsets, nothing behind
    yield g
    g.close()


def test_lag_alert_fires_to_a_webhook_when_a_group_falls_behind_and_resolves_when_it_catches_up(
        group: Group, hook: WebhookReceiver) -> None:
    AuditEvent.objects.create(action="group.reset_offset", target=f"{group.name}/{group.topic}", ok=True)  # known
    AlertRule.objects.create(name="billing behind", kind=AlertRule.GROUP_LAG_MESSAGES, target=group.name,
                             threshold=5, webhook_url=hook.url)
    subject = f"{group.name}/{group.topic}"

    assert services.run_sampling().outcome == JobRun.OK
    assert LagSample.objects.get(group=group.name).lag == 0
    assert evaluate().fired == 0 and hook.bodies == []

    group.produce(8)  # nobody consumes them
    services.run_sampling()
    assert LagSample.objects.filter(group=group.name).latest("timestamp").lag == 8
    assert evaluate().fired == 1
    assert hook.events() == [("firing", subject)]
    assert hook.bodies[0]["alert"]["value"] == 8 and hook.bodies[0]["status"] == "firing"

    group.produce(2)  # further behind: still one alert, no new notification
    services.run_sampling()
    assert evaluate().notifications == 0 and len(hook.bodies) == 1

    assert group.catch_up() == 10
    services.run_sampling()
    assert LagSample.objects.filter(group=group.name).latest("timestamp").lag == 0
    assert evaluate().resolved == 1
    assert hook.events() == [("firing", subject), ("resolved", subject)]
    assert hook.bodies[1]["status"] == "resolved" and hook.bodies[1]["alert"]["value"] == 0
    alert = Alert.objects.get()
    assert alert.state == Alert.RESOLVED and [n.ok for n in alert.notifications.all()] == [True, True]


# ---------------------------------------------------------------------------------------------- real worker
@dataclass
class Worker:
    proc: subprocess.Popen  # type: ignore[type-arg]
    hostname: str
    env: dict[str, str]
    db_path: Path

    def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db_path) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(sql, args).fetchall()]


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, redis_url: str, cluster: Cluster) -> Iterator[Worker]:
    tmp = tmp_path_factory.mktemp("alerts-worker")
    env = {**worker_env(redis_url, cluster.namesrv, tmp / "worker.sqlite3"),
           "CONSOLE_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}  # the test's webhook receiver is local
    manage(env, "migrate", "--noinput")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    hostname = f"alerts-test-{tmp.name}@localhost"
    with celery_worker(env, tmp / "worker.log", hostname, app) as proc:
        yield Worker(proc, hostname, env, tmp / "worker.sqlite3")


def test_through_the_worker_sampling_queues_the_evaluation_that_fires_and_resolves(
        worker: Worker, group: Group, hook: WebhookReceiver) -> None:
    """Only ``sample_lag`` is sent (as beat sends it); the evaluation it queues does the rest."""
    # the worker's own database: the group made known, and the rule
    manage(worker.env, "shell", "-c", (
        "from console.models import AuditEvent; from console.alerts.models import AlertRule; "
        f"AuditEvent.objects.create(action='group.reset_offset', target={group.name + '/' + group.topic!r}, "
        "ok=True); "
        f"AlertRule.objects.create(name='billing behind', kind='group_lag_messages', target={group.name!r}, "
        f"threshold=5, webhook_url={hook.url!r})"))
    subject = f"{group.name}/{group.topic}"

    def evaluations() -> list[dict[str, Any]]:
        return worker.rows("SELECT outcome, counts FROM monitoring_jobrun WHERE job = 'evaluate_alerts' ORDER BY id")

    def tick() -> dict[str, Any]:
        before = len(evaluations())
        assert tasks.sample_lag.delay().get(timeout=RESULT_TIMEOUT_S)["outcome"] == "ok"
        wait_until(lambda: len(evaluations()) > before, timeout=RESULT_TIMEOUT_S,
                   what="the alert evaluation the sampling queued")
        last = evaluations()[-1]
        return {"outcome": last["outcome"], "counts": json.loads(last["counts"])}

    first = tick()
    assert first["outcome"] == "ok" and first["counts"]["rules"] == 1 and first["counts"]["fired"] == 0
    group.produce(6)
    out = tick()
    assert (out["outcome"], out["counts"]["fired"], out["counts"]["notifications"]) == ("ok", 1, 1)
    assert hook.events() == [("firing", subject)] and hook.bodies[0]["alert"]["value"] == 6

    assert tick()["counts"]["notifications"] == 0  # still behind: no spam

    group.catch_up()
    out = tick()
    assert out["counts"]["resolved"] == 1
    assert hook.events() == [("firing", subject), ("resolved", subject)]
    alerts = worker.rows("SELECT state, value, subject FROM alerts_alert")
    assert alerts == [{"state": "resolved", "value": 0.0, "subject": subject}]
    runs = evaluations()
    assert [r["outcome"] for r in runs] == ["ok"] * 4  # one evaluation per sampling, none from elsewhere
    assert json.loads(runs[-1]["counts"])["resolved"] == 1
