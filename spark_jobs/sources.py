"""A DataFrame over snapshot segments: one row per CommitLog record, decoded by ``broker_core.codec``.

Work is split by segment and byte range (``spark_jobs.segments``); each Spark task maps its segment read-only up
to the published bound (or fetches its range from the broker when it cannot open the file:
``split_io.over_split``), walks the records it owns and decodes them with the codec's ``decode_record`` (the
function the broker's own reads use). Blank records end a sealed segment; a torn tail (a record whose magic or
lengths are wrong, or that runs past the bound) ends the walk and is reported, never decoded. Before building
rows a first pass checks the split chain (see ``segments.chain_breaks``) and re-plans any segment whose
sub-splits do not line up as one whole split, so the rows are exactly those of a sequential walk.
"""

from __future__ import annotations

from typing import Any

from broker_core.codec import CodecError
from spark_jobs.segments import (
    DEFAULT_SPLIT_BYTES,
    Segment,
    Split,
    SplitStats,
    chain_breaks,
    decode_at,
    finish,
    plan_splits,
    record_row,
    walk,
    whole_segment_splits,
)
from spark_jobs.split_io import over_split

COLUMNS = [
    ("topic", "string"), ("queue_id", "int"), ("queue_offset", "long"), ("phy_offset", "long"),
    ("store_size", "int"), ("msg_id", "string"), ("uniq_key", "string"), ("offset_msg_id", "string"),
    ("keys", "array<string>"), ("tags", "string"), ("properties", "map<string,string>"),
    ("born_timestamp", "long"), ("store_timestamp", "long"), ("born_host", "string"), ("store_host", "string"),
    ("reconsume_times", "int"), ("sys_flag", "int"), ("flag", "int"), ("body_crc", "long"),
    ("prepared_transaction_offset", "long"), ("body", "binary"), ("segment", "string"), ("pos", "long"),
]
RECORD_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)


def read_split(split: Split) -> tuple[SplitStats, list[dict[str, Any]]]:
    """Every record the split owns, as row dicts, and the split's stats (a torn record ends the walk)."""

    def body(buf: Any, sp: Split) -> tuple[SplitStats, list[dict[str, Any]]]:
        stats = SplitStats(sp.index, sp.segment)
        rows: list[dict[str, Any]] = []
        for pos in walk(buf, sp, stats):
            try:
                rec = decode_at(buf, pos, sp, check_crc=True)
            except CodecError:
                stats.last_end = pos
                finish(buf, sp, stats, pos)
                break
            rows.append(record_row(rec, sp, pos))
        stats.scanned = len(rows)
        stats.records = len(rows)
        return stats, rows

    return over_split(split, body)


def _chain_pass(split: Split) -> SplitStats:
    def body(buf: Any, sp: Split) -> tuple[SplitStats, None]:
        stats = SplitStats(sp.index, sp.segment)
        for _ in walk(buf, sp, stats):
            pass
        return stats, None

    return over_split(split, body)[0]


def verified_splits(spark: Any, segments: list[Segment], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[Split]:
    """Splits whose chain is checked (one cheap walk without decoding); broken segments become one split."""
    splits = plan_splits(segments, split_bytes)
    if all(s.start == 0 for s in splits):
        return splits
    stats = spark.sparkContext.parallelize(splits, len(splits)).map(_chain_pass).collect()
    broken = chain_breaks(splits, {st.index: st for st in stats})
    if not broken:
        return splits
    kept = [s for s in splits if s.path not in broken]
    return kept + whole_segment_splits(splits, broken, len(splits))


def records_rdd(spark: Any, segments: list[Segment], split_bytes: int = DEFAULT_SPLIT_BYTES) -> Any:
    """An RDD of row dicts, one partition per split."""
    splits = verified_splits(spark, segments, split_bytes)
    return spark.sparkContext.parallelize(splits, max(len(splits), 1)).flatMap(lambda sp: read_split(sp)[1])


def records_df(spark: Any, segments: list[Segment], split_bytes: int = DEFAULT_SPLIT_BYTES) -> Any:
    """The records of ``segments`` as a DataFrame with the columns of :data:`COLUMNS`."""
    names = [n for n, _ in COLUMNS]
    rdd = records_rdd(spark, segments, split_bytes).map(lambda r: tuple(r[n] for n in names))
    return spark.createDataFrame(rdd, RECORD_SCHEMA)
