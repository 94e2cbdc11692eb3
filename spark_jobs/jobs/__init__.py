"""Job entry points: ``search.run_search`` and ``trace.run_trace`` (each also a spark-submit CLI)."""
