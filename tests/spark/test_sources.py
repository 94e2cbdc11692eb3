"""The segment source against golden segment files and against a store written by the broker's own code."""

from __future__ import annotations

import shutil
from pathlib import Path

from broker_core.codec.message import decode_record
from spark_jobs.segments import Segment, chain_breaks, plan_splits
from spark_jobs.sources import read_split, records_df
from tests.conftest import GOLDEN
from tests.golden.make_golden_segments import RECORDS, SEALED_FROM, SEGMENT_SIZE, TORN_FROM, records


def _golden(tmp_path: Path, name: str, offset: int) -> Segment:
    path = tmp_path / f"{offset:020d}"
    shutil.copy(GOLDEN / name, path)
    return Segment(str(path), offset, SEGMENT_SIZE)


def _expected(base: int) -> list[dict]:
    out, pos = [], base
    for raw in records(base):
        rec = decode_record(raw)
        out.append({"phy_offset": pos, "topic": rec.topic, "body": rec.body, "properties": rec.properties,
                    "msg_id": rec.msg_id, "offset_msg_id": rec.offset_msg_id, "keys": rec.keys, "tags": rec.tags,
                    "queue_offset": rec.queue_offset, "reconsume_times": rec.reconsume_times,
                    "store_timestamp": rec.store_timestamp, "sys_flag": rec.sys_flag})
        pos += len(raw)
    return out


def test_golden_files_match_their_generator():
    from tests.golden.make_golden_segments import sealed, torn

    assert (GOLDEN / "commitlog_segment_sealed.bin").read_bytes() == sealed()
    assert (GOLDEN / "commitlog_segment_torn.bin").read_bytes() == torn()


def test_golden_sealed_and_torn_segments_every_split_size(tmp_path: Path):
    segs = [_golden(tmp_path, "commitlog_segment_sealed.bin", SEALED_FROM),
            _golden(tmp_path, "commitlog_segment_torn.bin", TORN_FROM)]
    want = _expected(SEALED_FROM) + _expected(TORN_FROM)
    for split_bytes in (SEGMENT_SIZE, 1000, 97, 13):
        splits = plan_splits(segs, split_bytes)
        results = [read_split(sp) for sp in splits]
        stats = {st.index: st for st, _ in results}
        assert chain_breaks(splits, stats) == set()
        rows = [r for _, part in results for r in part]
        assert [{k: r[k] for k in want[0]} for r in rows] == want, split_bytes
        stops = {st.segment: st.stop for st in stats.values() if st.stop != "split end"}
        assert stops[f"{SEALED_FROM:020d}"] == "blank"
        torn = [st.torn for st in stats.values() if st.torn]
        assert len(torn) == 1 and torn[0]["segment"] == f"{TORN_FROM:020d}"
        assert torn[0]["pos"] == sum(len(r) for r in records(TORN_FROM))
        assert torn[0]["reason"] not in ("blank", "bound", "end of data")  # the codec says why


def test_golden_segments_as_a_dataframe(spark, tmp_path: Path):
    segs = [_golden(tmp_path, "commitlog_segment_sealed.bin", SEALED_FROM),
            _golden(tmp_path, "commitlog_segment_torn.bin", TORN_FROM)]
    df = records_df(spark, segs, split_bytes=700)
    rows = sorted(df.collect(), key=lambda r: r["phy_offset"])
    want = _expected(SEALED_FROM) + _expected(TORN_FROM)
    assert len(rows) == 2 * len(RECORDS)
    for row, exp in zip(rows, want, strict=True):
        assert row["phy_offset"] == exp["phy_offset"] and bytes(row["body"]) == exp["body"]
        assert dict(row["properties"]) == exp["properties"] and row["msg_id"] == exp["msg_id"]
        assert list(row["keys"]) == exp["keys"] and row["tags"] == exp["tags"]
        assert row["offset_msg_id"] == exp["offset_msg_id"] and row["sys_flag"] == exp["sys_flag"]
    assert df.filter("topic = 'Orders'").count() == 4
