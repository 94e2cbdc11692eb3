"""Spark jobs of the console's search and trace pages (thin: :mod:`workers.spark_jobs_service` does the work).

Routed to the ``spark`` queue (``CELERY_TASK_ROUTES``), which the Procfile's ``spark`` worker consumes with one
process, so a long scan never holds up the scheduled jobs. Not retried: a failure is recorded on the Job row. A
worker killed mid-job leaves the job ``running``; when the worker (same hostname) starts again it marks such jobs
failed (:func:`workers.spark_jobs_service.fail_orphaned`).
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from console.jobs.names import TASK_SPARK_SEARCH, TASK_SPARK_TRACE
from workers import spark_jobs_service


@shared_task(bind=True, name=TASK_SPARK_SEARCH)
def spark_search(self: Task, job_id: int) -> dict[str, Any]:
    return spark_jobs_service.run_job(int(job_id), worker=self.request.hostname)


@shared_task(bind=True, name=TASK_SPARK_TRACE)
def spark_trace(self: Task, job_id: int) -> dict[str, Any]:
    return spark_jobs_service.run_job(int(job_id), worker=self.request.hostname)


@worker_ready.connect
def fail_orphaned_jobs(sender: Any, **kwargs: Any) -> None:
    """A worker starting again fails the Spark jobs its previous life left running."""
    spark_jobs_service.fail_orphaned(sender.hostname)
