"""CSV exports escape cells a spreadsheet would run as formulas (the Spark search export and DLQ exports)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from console.selectors.ui_dlq import as_csv
from spark_jobs.output import ResultWriter

DANGEROUS = ["=HYPERLINK(\"http://evil\")", "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def test_the_search_export_escapes_formula_cells(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    with ResultWriter(csv_path=path, extra_columns=("broker",)) as w:
        for i, text in enumerate(DANGEROUS):
            w.write({"topic": text, "queue_offset": -1 if i == 0 else i, "keys": [text, "k"], "tags": "ok",
                     "body": text.encode(), "properties": {"a": text}}, broker=text)
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(DANGEROUS)
    for row, text in zip(rows, DANGEROUS, strict=True):
        for column in ("broker", "topic", "body_text", "keys"):
            assert row[column].startswith("'" + text[:1]), (column, row[column])
        assert row["tags"] == "ok" and row["properties"].startswith("{")
    assert rows[0]["queue_offset"] == "-1"  # numbers are not text and stay as they are


def test_the_dlq_export_escapes_formula_cells() -> None:
    out = as_csv([{"msg_id": text, "keys": [text]} for text in DANGEROUS], with_body=False)
    rows = list(csv.DictReader(io.StringIO(out, newline="")))
    assert [r["msg_id"] for r in rows] == ["'" + t for t in DANGEROUS]
