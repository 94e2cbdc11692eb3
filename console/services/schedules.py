"""Writes on the scheduled jobs: run one now, and change its interval or enabled flag. Both are audited.

Schedule edits go to django-celery-beat's :class:`PeriodicTask` (``save`` bumps its change marker, so a running
beat with the ``DatabaseScheduler`` reloads the schedule within its sync interval). "Run now" publishes the
job's task by name through :mod:`console.services.schedules_send`.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from console.errors import bad_request
from console.selectors.monitoring import job_name, periodic_task, schedule_json
from console.services import schedules_send
from console.services.audit import record

PERIODS = (IntervalSchedule.SECONDS, IntervalSchedule.MINUTES, IntervalSchedule.HOURS, IntervalSchedule.DAYS)
MAX_EVERY = 1_000_000


def run_now(user: Any, name: str) -> dict[str, Any]:
    """Send job ``name``'s task now (broker jobs fan out to every broker, as a beat tick does)."""
    task = periodic_task(name)
    try:
        task_id = schedules_send.send(task.task)
    except ConnectionError as exc:
        record(user, "schedule.run_now", name, after={"error": str(exc)}, ok=False)
        raise
    record(user, "schedule.run_now", name, after={"task": task.task, "task_id": task_id})
    return {"job": name, "task": task.task, "task_id": task_id}


def _state(task: PeriodicTask) -> dict[str, Any]:
    return {"enabled": task.enabled, "schedule": schedule_json(task)["text"]}


def update_schedule(user: Any, name: str, *, every: int | None = None, period: str | None = None,
                    enabled: bool | None = None) -> PeriodicTask:
    """Change job ``name``'s interval (``every`` ``period``; the period defaults to the current one, or
    seconds) and/or its enabled flag."""
    with transaction.atomic():
        task = periodic_task(name)
        before = _state(task)
        if every is not None or period is not None:
            period = period or (task.interval.period if task.interval else IntervalSchedule.SECONDS)
            every = every if every is not None else (task.interval.every if task.interval else 0)
            if period not in PERIODS:
                raise bad_request("invalid_period", f"period must be one of {', '.join(PERIODS)}")
            if not 1 <= int(every) <= MAX_EVERY:
                raise bad_request("invalid_every", f"every must be 1..{MAX_EVERY}")
            task.interval, _ = IntervalSchedule.objects.get_or_create(every=int(every), period=period)
            task.crontab = task.solar = task.clocked = None
        if enabled is not None:
            task.enabled = bool(enabled)
        task.save()
        record(user, "schedule.update", job_name(task.task), before=before, after=_state(task))
    return task
