"""Spark jobs of the console's search and trace pages (thin: :mod:`workers.spark_jobs_service` does the work).

Routed to the ``spark`` queue (``CELERY_TASK_ROUTES``), which the Procfile's ``spark`` worker consumes with one
process, so a long scan never holds up the scheduled jobs. Not retried: a failure is recorded on the Job row. A
worker killed mid-job leaves the job ``running``; when the worker (same hostname) starts again it marks such jobs
failed (:func:`workers.spark_jobs_service.fail_orphaned`).

The ``workers.spark_results_*`` tasks answer the console's reads of finished jobs' results (a page of search
rows, a trace, an export chunk) from this worker's results URI (:mod:`workers.spark_results`); the console waits
for the answer with a timeout. They are on the same queue because this worker is where the results URI is
configured (and, for a Hadoop URI, where the SparkSession is).
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from console.jobs.names import (
    TASK_SPARK_RESULTS_EXPORT,
    TASK_SPARK_RESULTS_PAGE,
    TASK_SPARK_RESULTS_TRACE,
    TASK_SPARK_SEARCH,
    TASK_SPARK_TRACE,
)
from workers import spark_jobs_service, spark_results


@shared_task(bind=True, name=TASK_SPARK_SEARCH)
def spark_search(self: Task, job_id: int) -> dict[str, Any]:
    return spark_jobs_service.run_job(int(job_id), worker=self.request.hostname)


@shared_task(bind=True, name=TASK_SPARK_TRACE)
def spark_trace(self: Task, job_id: int) -> dict[str, Any]:
    return spark_jobs_service.run_job(int(job_id), worker=self.request.hostname)


@shared_task(name=TASK_SPARK_RESULTS_PAGE)
def spark_results_page(job_id: int, offset: int, limit: int, with_body: bool) -> dict[str, Any]:
    return spark_results.search_page(int(job_id), int(offset), int(limit), bool(with_body))


@shared_task(name=TASK_SPARK_RESULTS_TRACE)
def spark_results_trace(job_id: int) -> dict[str, Any]:
    return spark_results.trace_document(int(job_id))


@shared_task(name=TASK_SPARK_RESULTS_EXPORT)
def spark_results_export(job_id: int, fmt: str, offset: int, length: int) -> dict[str, Any]:
    return spark_results.export_chunk(int(job_id), str(fmt), int(offset), int(length))


@worker_ready.connect
def fail_orphaned_jobs(sender: Any, **kwargs: Any) -> None:
    """A worker starting again fails the Spark jobs its previous life left running."""
    spark_jobs_service.fail_orphaned(sender.hostname)
