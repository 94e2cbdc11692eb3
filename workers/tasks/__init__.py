"""Celery tasks, thin: each calls one service of :mod:`workers.services` and returns what the run did.

Broker jobs (``retention``, ``disk_check``, ``deliver_delayed``) take a broker name (and optionally its
address); called without one, as beat does, they fan out one task per registered broker. A broker or name
server that cannot be reached makes the run a recorded failure and the task retry with exponential back-off.
Task names are stable (``workers.<job>``) so the console can ``send_task`` them by name ("run now").
"""

from workers.tasks.alerts import evaluate_alerts
from workers.tasks.jobs import deliver_delayed, disk_check, prune, retention, sample_lag
from workers.tasks.resend import dlq_resend
from workers.tasks.spark import spark_search, spark_trace

__all__ = ["deliver_delayed", "disk_check", "dlq_resend", "evaluate_alerts", "prune", "retention", "sample_lag",
           "spark_search", "spark_trace"]
