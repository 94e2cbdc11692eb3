"""The suite's one local SparkSession."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every Spark test (starting one takes seconds): local[2], no UI, few partitions.
    pyspark is imported only here, when a test asks for the session, so the unit suite runs without it."""
    pytest.importorskip("pyspark")
    from spark_jobs.session import build_session

    session = build_session("broker_core-tests", master="local[2]", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g",
        "spark.python.worker.reuse": "true"}, ship_code=True)
    yield session
    session.stop()
