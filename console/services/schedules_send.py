"""Publishing a task by name for a worker ("run now", queuing a Spark or DLQ resend job).

The Celery app and the reasons the console publishes by name live in :mod:`console.celery_client`, the one
console module that imports Celery; this module keeps the services' import path. Publishing does not wait for
the task: it returns the task id. Redis that cannot be reached is a ``ConnectionError`` (the API's 503).
"""

from __future__ import annotations

from console.celery_client import RETRY_POLICY, send

__all__ = ["RETRY_POLICY", "send"]
