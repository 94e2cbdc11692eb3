"""Full-scan search over snapshot segments.

``run_search(spark, segments, spec, progress=None, job_group=None, output_dir=None) -> SearchResult``: every
record of the snapshot is walked; ``scanned`` counts those in the spec's topics and store-time range, ``matched``
those that pass every filter. All matches are returned (``spec.limit`` keeps fewer rows and sets ``truncated``;
the counts stay exact). With ``output_dir`` the rows are written as ``results.jsonl`` and ``results.csv``.

CLI (spark-submit or python -m)::

    python -m spark_jobs.jobs.search --snapshot /store/snapshots/<id> --topic orders --key order-42 --out /tmp/r
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_jobs.output import write_csv, write_jsonl
from spark_jobs.runner import ProgressCallback, codecs_of, run_splits
from spark_jobs.segments import (
    DEFAULT_SPLIT_BYTES,
    Segment,
    Split,
    plan_splits,
    segments_from_manifest,
    segments_of,
)
from spark_jobs.transforms.filters import Compiled, SearchSpec
from spark_jobs.transforms.scan import scan_split


@dataclass
class SearchResult:
    rows: list[dict[str, Any]]
    scanned: int  # records in the topics and time range
    matched: int
    records_read: int  # every record walked
    bytes_scanned: int
    segments: int
    splits: int
    truncated: bool
    torn: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)
    codecs: list[str] = field(default_factory=list)  # the codec the splits were decoded with where they ran

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "rows"}


class _SearchFn:
    """Picklable split function."""

    def __init__(self, spec: SearchSpec) -> None:
        self.spec = spec

    def __call__(self, split: Split):  # type: ignore[no-untyped-def]  # returns a pyspark partition iterator (no stubs)
        return scan_split(split, Compiled(self.spec), limit=self.spec.limit)


def run_search(spark: Any, segments: list[Segment] | dict[str, Any] | str, spec: SearchSpec | dict[str, Any],
               progress: ProgressCallback | None = None, job_group: str | None = None, *,
               output_dir: str | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES) -> SearchResult:
    """Search the records of ``segments`` (a list, a snapshot manifest, or a snapshot directory)."""
    t0 = time.perf_counter()
    if not isinstance(segments, list):
        segments = segments_from_manifest(segments)
    if isinstance(spec, dict):
        spec = SearchSpec.from_dict(spec)
    Compiled(spec)  # validate on the driver (bad regex, JSON path, hex)
    splits = plan_splits(segments, split_bytes)
    stats, rows, torn = run_splits(spark, splits, _SearchFn(spec), progress=progress, job_group=job_group,
                                   description="broker_core search")
    matched = sum(int(s.extra.get("matched", 0)) for s in stats.values())
    if spec.limit is not None:
        rows = rows[:spec.limit]
    result = SearchResult(
        rows=rows, scanned=sum(s.scanned for s in stats.values()), matched=matched,
        records_read=sum(s.records for s in stats.values()), bytes_scanned=sum(s.bytes for s in stats.values()),
        segments=len(segments), splits=len(stats), truncated=len(rows) < matched, torn=torn, codecs=codecs_of(stats))
    if output_dir:
        out = Path(output_dir)
        result.outputs = {"jsonl": write_jsonl(rows, out / "results.jsonl"),
                          "csv": write_csv(rows, out / "results.csv")}
    result.elapsed_s = round(time.perf_counter() - t0, 3)
    if output_dir:
        (Path(output_dir) / "summary.json").write_text(json.dumps(result.summary(), indent=1))
        result.outputs["summary"] = str(Path(output_dir) / "summary.json")
    return result


def _parse_props(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"--property wants NAME=VALUE, got {item!r}")
        out[k] = v
    return out


def _json_value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m spark_jobs.jobs.search",
        description="Full-scan search of CommitLog records in a broker segment snapshot "
                    "(take one with AdminClient.snapshot_segments). Filters are ANDed. Spark settings come from "
                    "SPARK_MASTER (default local[*]) and SPARK_CONF_* (see spark_jobs/session.py).")
    ap.add_argument("--snapshot", required=True, action="append",
                    help="snapshot directory (holding manifest.json) or manifest file; repeat for several brokers "
                         "(a manifest with brokerAddr and readToken is read over the network where its files are "
                         "not visible)")
    ap.add_argument("--topic", action="append", default=[], help="topic to search (repeat; default every topic)")
    ap.add_argument("--begin-ms", type=int, help="store time from (ms, inclusive)")
    ap.add_argument("--end-ms", type=int, help="store time to (ms, inclusive)")
    ap.add_argument("--key", help="a KEYS value")
    ap.add_argument("--tag", help="the TAGS value ('a || b' for any)")
    ap.add_argument("--property", action="append", default=[], metavar="NAME=VALUE", help="property equality")
    ap.add_argument("--body-contains", help="body substring (UTF-8 text)")
    ap.add_argument("--body-contains-hex", help="body substring as hex bytes")
    ap.add_argument("--body-regex", help="regex over the body as UTF-8 text")
    ap.add_argument("--body-regex-bytes", help="bytes regex over the raw body (latin-1 text = bytes)")
    ap.add_argument("--json-path", help="JSON path in the body, e.g. $.order.id")
    ap.add_argument("--json-equals", help="value at --json-path (parsed as JSON when it is JSON, else a string)")
    ap.add_argument("--msg-id", help="unique key or offset message id")
    ap.add_argument("--limit", type=int, help="rows to keep (counts stay exact)")
    ap.add_argument("--split-mib", type=int, default=DEFAULT_SPLIT_BYTES >> 20,
                    help="bytes per split (a Spark task runs a group of splits), MiB")
    ap.add_argument("--out", required=True, help="output directory: results.jsonl, results.csv, summary.json")
    args = ap.parse_args(argv)
    spec = SearchSpec(topics=args.topic, begin_ms=args.begin_ms, end_ms=args.end_ms, key=args.key, tag=args.tag,
                      properties=_parse_props(args.property), body_contains=args.body_contains,
                      body_contains_hex=args.body_contains_hex, body_regex=args.body_regex,
                      body_regex_bytes=args.body_regex_bytes, json_path=args.json_path,
                      json_equals=_json_value(args.json_equals), msg_id=args.msg_id, limit=args.limit)
    from spark_jobs.session import build_session

    spark = build_session("broker_core-search")
    try:
        result = run_search(spark, segments_of(args.snapshot), spec, output_dir=args.out,
                            split_bytes=args.split_mib << 20,
                            progress=lambda p: print(json.dumps({"progress": p}), file=sys.stderr))
    finally:
        spark.stop()
    print(json.dumps(result.summary()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
