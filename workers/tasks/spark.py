"""Spark jobs of the console's search and trace pages (thin: :mod:`workers.spark_jobs_service` does the work).

Routed to the ``spark`` queue (``CELERY_TASK_ROUTES``), which the Procfile's ``spark`` worker consumes with one
process, so a long scan never holds up the scheduled jobs. Not retried: a failure is recorded on the Job row.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from workers import spark_jobs_service


@shared_task(name="workers.spark_search")
def spark_search(job_id: int) -> dict[str, Any]:
    return spark_jobs_service.run_job(int(job_id))


@shared_task(name="workers.spark_trace")
def spark_trace(job_id: int) -> dict[str, Any]:
    return spark_jobs_service.run_job(int(job_id))
