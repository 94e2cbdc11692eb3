"""Console jobs, one owner for the concern: the :class:`~console.jobs.models.Job` row (kept under the ``console``
app label so its table and migrations hold), its state machine (:mod:`.states`), the Celery task names and job
kinds (:mod:`.names`, Django-free so workers and beat import it), the DLQ resend job a Celery worker runs
(:mod:`.resend`, with its lease, records and broker lookup in ``resend_*``), the Spark search/trace jobs the
console queues (:mod:`.spark`) and the reads of both (:mod:`.selectors`, :mod:`.results`). This package's
``__init__`` imports nothing, so ``names`` stays light."""
