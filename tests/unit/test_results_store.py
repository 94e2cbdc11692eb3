"""The results store's local backend and URI rules, and the row index the result writer keeps (no Spark: the
Hadoop backend runs in tests/workers/test_spark_results.py through a real worker's SparkSession)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.output import ResultWriter, seek_row
from spark_jobs.results_store import HadoopStore, LocalStore, ResultMissing, is_local, open_store


@pytest.mark.parametrize("uri, local", [
    ("/var/spark-results", True), ("relative/dir", True), ("file:///srv/results", True),
    ("file://localhost/srv/results", True), ("hdfs://nn:8020/results", False), ("s3a://bucket/results", False),
    ("brokerres:///tmp/x", False),
])
def test_the_scheme_picks_the_backend(uri: str, local: bool) -> None:
    assert is_local(uri) is local
    store = open_store(uri, session=lambda: None)
    assert isinstance(store, LocalStore if local else HadoopStore)


def test_a_hadoop_uri_needs_a_session_and_a_file_uri_a_local_host() -> None:
    with pytest.raises(ValueError, match="needs a SparkSession"):
        open_store("hdfs://nn/results")
    with pytest.raises(ValueError, match="must name a local path"):
        LocalStore("file://otherhost/results")
    assert LocalStore("file:///srv/a%20b").root == Path("/srv/a b")


def test_local_store_writes_reads_seeks_and_deletes(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/results")
    with pytest.raises(ResultMissing):
        store.open(7, "results.jsonl")
    with pytest.raises(ResultMissing):
        store.size(7, "results.jsonl")
    with store.create(7, "results.jsonl") as f:
        f.write(b"0123456789")
    assert store.location(7, "results.jsonl") == str(tmp_path / "results" / "7" / "results.jsonl")
    assert store.size(7, "results.jsonl") == 10
    with store.open(7, "results.jsonl") as f:
        f.seek(4)
        assert f.read(3) == b"456"
    assert store.delete(7) is True and store.delete(7) is False
    assert not (tmp_path / "results" / "7").exists()


@pytest.mark.parametrize("job_id, name", [(-1, "a"), ("7", "a"), (True, "a"), (1, "../a"), (1, "a/b"), (1, "")])
def test_job_ids_and_names_cannot_leave_the_results_directory(tmp_path: Path, job_id: object, name: str) -> None:
    with pytest.raises(ValueError):
        LocalStore(str(tmp_path)).create(job_id, name)  # type: ignore[arg-type]  # the wrong types on purpose


def test_the_row_index_lets_a_reader_seek_to_any_row(tmp_path: Path) -> None:
    with ResultWriter(open(tmp_path / "rows.jsonl", "wb"), index_every=3) as w:
        for i in range(10):
            w.write({"i": i, "body": f"é{i}".encode()})  # non-ASCII: positions are bytes, not characters
    index = json.loads(json.dumps(w.row_index()))
    assert index["rows"] == 10 and index["every"] == 3 and len(index["positions"]) == 4
    data = (tmp_path / "rows.jsonl").read_bytes()
    for row in range(12):
        position, skip = seek_row(index, row)
        lines = data[position:].splitlines()[skip:]
        assert [json.loads(line)["i"] for line in lines] == list(range(row, 10))
    assert seek_row(None, 5) == (0, 5) and seek_row({"every": 0}, 5) == (0, 5)
