"""Celery task names and console job kinds, defined once: ``workers/tasks`` register the tasks under these
names, ``workers/schedule.py`` schedules them, and the console publishes and records them (no Django here)."""

from __future__ import annotations

TASK_PREFIX = "workers."
TASK_RETENTION = "workers.retention"
TASK_DISK_CHECK = "workers.disk_check"
TASK_DELIVER_DELAYED = "workers.deliver_delayed"
TASK_SAMPLE_LAG = "workers.sample_lag"
TASK_PRUNE = "workers.prune"
TASK_EVALUATE_ALERTS = "workers.evaluate_alerts"
TASK_SAMPLE_CONTROLLER = "workers.sample_controller"
TASK_SPARK_SEARCH = "workers.spark_search"
TASK_SPARK_TRACE = "workers.spark_trace"
TASK_DLQ_RESEND = "workers.dlq_resend"
# reads of a Spark job's results, answered by a spark worker (where the results URI is), awaited by the console
TASK_SPARK_RESULTS_PAGE = "workers.spark_results_page"
TASK_SPARK_RESULTS_TRACE = "workers.spark_results_trace"
TASK_SPARK_RESULTS_EXPORT = "workers.spark_results_export"

# Job.kind of the Spark jobs
SEARCH_KIND = "spark.search"
TRACE_KIND = "spark.trace"
# Job.kind of a DLQ resend (also the audit action of a resend)
RESEND_KIND = "dlq.resend"
