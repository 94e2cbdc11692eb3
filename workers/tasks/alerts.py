"""The alert evaluation task: thin, it runs :func:`console.alerts.services.evaluate` under the job's lock and
records the run (counts: rules, fired, resolved, notifications...); a rule whose data could not be read (the name
server down) makes the run failed with the reason, the other rules are evaluated all the same."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from console.alerts.services import evaluate
from console.jobs.names import TASK_EVALUATE_ALERTS
from workers import services

EVALUATE_ALERTS = "evaluate_alerts"


def _body() -> tuple[dict[str, Any], str]:
    report = evaluate()
    return report.counts(), "; ".join(report.errors)


@shared_task(name=TASK_EVALUATE_ALERTS)
def evaluate_alerts() -> dict[str, Any]:
    return services.summary(services.run_locked(EVALUATE_ALERTS, "", _body))
