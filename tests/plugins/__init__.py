"""Fixtures as pytest plugins, loaded by tests/conftest.py: stores (in-process), brokers (SDK clients on
a ``cluster``), redis (a real redis-server), spark (one local SparkSession)."""
