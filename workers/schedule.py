"""Every beat entry in one place, and their installation into django-celery-beat's tables (where the console
edits them and beat's ``DatabaseScheduler`` reads them).

- retention every 60 s: the broker deletes only during its ``deleteWhen`` hour(s) or when the disk demands
  it, so calling it more often than hourly is correct and idempotent, and a pass deletes at most 10 segments
  (the next tick continues);
- disk check every 10 s; delay-level delivery every second (a tick not started within 5 s is dropped:
  the next one delivers the same messages); sampling every minute; downsampling and pruning hourly; the
  controller (RocketMQ 5 controller mode) every 10 s, so an election shows and alerts within seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from console.jobs.names import (
    TASK_DELIVER_DELAYED,
    TASK_DISK_CHECK,
    TASK_EVALUATE_ALERTS,
    TASK_PRUNE,
    TASK_RETENTION,
    TASK_SAMPLE_CONTROLLER,
    TASK_SAMPLE_LAG,
)


@dataclass(frozen=True)
class BeatEntry:
    name: str
    task: str
    every: int
    period: str = IntervalSchedule.SECONDS
    expire_seconds: int | None = None
    description: str = ""


ENTRIES: tuple[BeatEntry, ...] = (
    BeatEntry("broker_core: retention", TASK_RETENTION, 60,
              description="Delete expired CommitLog/ConsumeQueue/index files per the broker's deleteWhen, "
                          "fileReservedTime and disk-ratio rules (at most 10 segments a pass)."),
    BeatEntry("broker_core: disk check", TASK_DISK_CHECK, 10, expire_seconds=30,
              description="Measure each broker's store disk; at 90% the broker refuses writes."),
    BeatEntry("broker_core: delayed delivery", TASK_DELIVER_DELAYED, 1, expire_seconds=5,
              description="Deliver delay-level messages that are due; records delivered and oldest overdue."),
    BeatEntry("broker_core: lag sampling", TASK_SAMPLE_LAG, 60,
              description="Sample topic put/get rates, group lag (messages and seconds), DLQ sizes and broker "
                          "disk use and rates for the dashboard's history."),
    BeatEntry("broker_core: prune", TASK_PRUNE, 1, IntervalSchedule.HOURS,
              description="Downsample raw samples past 24 h to hourly averages, drop samples past the kept days "
                          "and job runs beyond the kept number."),
    BeatEntry("broker_core: controller sampling", TASK_SAMPLE_CONTROLLER, 10, expire_seconds=10,
              description="Record each broker-set's master, epochs and SyncStateSet from the RocketMQ 5 "
                          "controller (BROKER_CORE_CONTROLLER) and the elections between samples; an election "
                          "evaluates the alert rules at once. Does nothing without a controller."),
    BeatEntry("broker_core: alerts", TASK_EVALUATE_ALERTS, 60, expire_seconds=55,
              description="Evaluate the alert rules on the latest samples and the name server's broker list; "
                          "notify by email and webhook when an alert fires or resolves."),
)


def beat_schedule() -> dict[str, dict[str, object]]:
    """The entries in Celery's ``beat_schedule`` form (for a beat without the database scheduler)."""
    seconds = {IntervalSchedule.SECONDS: 1, IntervalSchedule.MINUTES: 60, IntervalSchedule.HOURS: 3600,
               IntervalSchedule.DAYS: 86400}
    out: dict[str, dict[str, object]] = {}
    for e in ENTRIES:
        entry: dict[str, object] = {"task": e.task, "schedule": float(e.every * seconds[e.period])}
        if e.expire_seconds:
            entry["options"] = {"expires": e.expire_seconds}
        out[e.name] = entry
    return out


def install_schedules(reset: bool = False) -> list[tuple[str, str]]:
    """Create each entry's :class:`PeriodicTask` if missing (idempotent). Existing rows keep what an operator
    changed (interval, enabled) unless ``reset``. Returns ``(name, "created" | "kept" | "reset")`` pairs."""
    done = []
    with transaction.atomic():
        for e in ENTRIES:
            interval, _ = IntervalSchedule.objects.get_or_create(every=e.every, period=e.period)
            defaults = {"task": e.task, "interval": interval, "expire_seconds": e.expire_seconds,
                        "description": e.description, "enabled": True}
            row = PeriodicTask.objects.filter(name=e.name).first()
            if row is None:
                PeriodicTask.objects.create(name=e.name, **defaults)
                done.append((e.name, "created"))
            elif reset:
                for field, value in defaults.items():
                    setattr(row, field, value)
                row.crontab = row.solar = row.clocked = None
                row.save()
                done.append((e.name, "reset"))
            else:
                done.append((e.name, "kept"))
    return done
