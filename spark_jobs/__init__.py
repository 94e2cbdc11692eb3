"""Spark jobs over broker segment snapshots: the message trace and the full-scan search.

Layering: imports only ``broker_core.codec``, pyspark and the standard library (an import-linter contract
checks it). Jobs read only snapshot directories (hard links made by the broker's SNAPSHOT_SEGMENTS
operation), never a store directory, and never past a segment's published bound.
"""
