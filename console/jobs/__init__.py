"""Console jobs, one owner for the concern: the :class:`~console.jobs.models.Job` row (kept under the ``console``
app label so its table and migrations hold), its state machine (:mod:`.states`), the Celery task names and job
kinds (:mod:`.names`, Django-free so workers and beat import it), the DLQ resend job that runs in the web process
(:mod:`.resend`), the Spark search/trace jobs the console queues (:mod:`.spark`) and the reads of both
(:mod:`.selectors`, :mod:`.results`). This package's ``__init__`` imports nothing, so ``names`` stays light."""
