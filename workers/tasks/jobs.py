"""The scheduled tasks (see :mod:`workers.tasks`)."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from console.jobs.names import (
    TASK_DELIVER_DELAYED,
    TASK_DISK_CHECK,
    TASK_PRUNE,
    TASK_RETENTION,
    TASK_SAMPLE_CONTROLLER,
    TASK_SAMPLE_LAG,
)
from workers import services
from workers.tasks.alerts import evaluate_alerts

RETRY = {"autoretry_for": (ConnectionError, TimeoutError), "retry_backoff": True, "retry_backoff_max": 300,
         "retry_jitter": True, "max_retries": 5}
# delivery runs every second anyway: a short back-off, few retries
RETRY_FAST = {**RETRY, "retry_backoff_max": 8, "max_retries": 2}


def _fan_out(task: Task, job: str) -> dict[str, Any]:
    """Queue ``task`` once per registered broker; returns the brokers."""
    brokers = services.fan_out_targets(job)
    for name, addr in brokers.items():
        task.delay(broker=name, addr=addr)
    return {"fanned_out": sorted(brokers)}


@shared_task(bind=True, name=TASK_RETENTION, **RETRY)
def retention(self: Task, broker: str | None = None, addr: str | None = None) -> dict[str, Any]:
    if broker is None:
        return _fan_out(self, services.RETENTION)
    return services.summary(services.run_retention(broker, addr))


@shared_task(bind=True, name=TASK_DISK_CHECK, **RETRY)
def disk_check(self: Task, broker: str | None = None, addr: str | None = None) -> dict[str, Any]:
    if broker is None:
        return _fan_out(self, services.DISK_CHECK)
    return services.summary(services.run_disk_check(broker, addr))


@shared_task(bind=True, name=TASK_DELIVER_DELAYED, **RETRY_FAST)
def deliver_delayed(self: Task, broker: str | None = None, addr: str | None = None) -> dict[str, Any]:
    if broker is None:
        return _fan_out(self, services.DELIVER_DELAYED)
    return services.summary(services.run_delay_delivery(broker, addr))


@shared_task(name=TASK_SAMPLE_LAG, **RETRY)
def sample_lag() -> dict[str, Any]:
    """Sample, then queue an alert evaluation so lag and DLQ rules see the new samples at once rather than at
    the alerts' own next tick (up to a minute later)."""
    out = services.summary(services.run_sampling())
    if out["outcome"] == "ok":
        evaluate_alerts.delay()
    return out


@shared_task(name=TASK_PRUNE)
def prune() -> dict[str, Any]:
    return services.summary(services.run_prune())


@shared_task(name=TASK_SAMPLE_CONTROLLER, **RETRY_FAST)
def sample_controller() -> dict[str, Any]:
    """Record controller mode's state and elections; a new election queues an alert evaluation at once (the
    ``election`` alert kind)."""
    run = services.run_controller_sampling()
    if run is None:
        return {"outcome": "skipped", "error": "BROKER_CORE_CONTROLLER is not set"}
    out = services.summary(run)
    if out["outcome"] == "ok" and out["counts"].get("elections"):
        evaluate_alerts.delay()
    return out
