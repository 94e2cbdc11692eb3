"""Search over 200k records in many segments with planted matches for every filter type, and the snapshot
surviving retention: the store is written in-process with the broker's MessageStore (fast), the snapshot is
taken with the broker's own snapshot code."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest

from broker_core.store import MessageStore
from broker_core.store.message import MessageInner
from broker_core.store.snapshot import SegmentSnapshots
from spark_jobs.jobs.search import run_search
from spark_jobs.transforms.filters import SearchSpec
from tests.conftest import small_config

N = 200_000
T0 = 1_700_000_000_000
PLANTS: dict[str, list[int]] = {}


def _plant(kind: str, rng: random.Random, taken: set[int], n: int) -> list[int]:
    picks = []
    while len(picks) < n:
        i = rng.randrange(N)
        if i not in taken:
            taken.add(i)
            picks.append(i)
    PLANTS[kind] = sorted(picks)
    return picks


def _message(i: int, kind: str | None) -> MessageInner:
    topic = "Alpha" if i % 3 else "Beta"
    body: bytes = f"plain body {i} lorem ipsum".encode()
    keys, tags, props = [f"k{i}"], "common", {"color": "red"}
    if kind == "key":
        keys = [f"k{i}", "needle-key"]
    elif kind == "key_decoy":
        keys = ["needle-key2"]
    elif kind == "tag":
        tags = "needle-tag"
    elif kind == "tag_decoy":
        tags = "needle-tagx"
    elif kind == "prop":
        props = {"color": "ultraviolet"}
    elif kind == "prop_decoy":
        props = {"color": "ultra", "other": "ultraviolet"}
    elif kind == "text":
        body = f"{i} a naïve needle, café".encode()
    elif kind == "raw":
        body = b"\x00\xffNEEDLE\xfe" + i.to_bytes(4, "big")
    elif kind == "regex":
        body = f"ref order-{10000 + i % 90000}-xyz".encode()
    elif kind == "regex_decoy":
        body = b"ref order-123-xyz"
    elif kind == "json":
        body = json.dumps({"a": {"b": [{"c": "hit"}], "n": i}}).encode()
    elif kind == "json_decoy":
        body = json.dumps({"a": {"b": [{"c": "miss"}, {"c": "hit"}]}}).encode()
    return MessageInner(topic, body, i % 4, keys=keys, tags=tags, properties=props)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from broker_core.store.clock import ManualClock

    tmp = tmp_path_factory.mktemp("search")
    rng = random.Random(7)
    taken: set[int] = set()
    kinds: dict[int, str] = {}
    for kind, n in (("key", 5), ("key_decoy", 3), ("tag", 7), ("tag_decoy", 3), ("prop", 4), ("prop_decoy", 3),
                    ("text", 6), ("raw", 3), ("regex", 5), ("regex_decoy", 3), ("json", 4), ("json_decoy", 3)):
        for i in _plant(kind, rng, taken, n):
            kinds[i] = kind
    clock = ManualClock(T0)
    store = MessageStore(small_config(tmp / "store", mapped_file_size_commit_log_bytes=4 * 1024 * 1024,
                                      message_index_enable=False), clock, background=False).start()
    try:
        for start in range(0, N, 1000):  # store time = T0 + index // 1000 * 10
            res = store.put_messages([_message(i, kinds.get(i)) for i in range(start, start + 1000)])
            assert all(r.ok for r in res)
            clock.advance(10)
        snaps = SegmentSnapshots(store.commit_log, tmp / "store" / "snapshots", clock.now_ms)
        manifest = snaps.take()
        assert len(manifest["segments"]) >= 6
        # retention deletes the sealed segments while "the job runs": the hard links keep them readable
        store.clean_expired_files(None, True)
        for seg in manifest["segments"][:-1]:
            assert not (store.config.store.commit_log_dir / seg["fileName"]).exists()
    finally:
        store.shutdown()
    return manifest


def _idx(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(int(r["keys"][0][1:]) if r["keys"] and r["keys"][0].startswith("k") and r["keys"][0][1:].isdigit()
                  else -1 for r in rows)


def _planted(kind: str, topic: str | None = None) -> list[int]:
    return [i for i in PLANTS[kind] if topic is None or ("Alpha" if i % 3 else "Beta") == topic]


@pytest.mark.parametrize(("spec", "kind"), [
    (SearchSpec(key="needle-key"), "key"),
    (SearchSpec(tag="needle-tag"), "tag"),
    (SearchSpec(properties={"color": "ultraviolet"}), "prop"),
    (SearchSpec(body_contains="naïve needle"), "text"),
    (SearchSpec(body_contains_hex="00ff4e4545444c45fe"), "raw"),
    (SearchSpec(body_regex=r"order-\d{5}-xyz"), "regex"),
    (SearchSpec(body_regex_bytes="\x00\xffNEE+DLE"), "raw"),
    (SearchSpec(json_path="$.a.b[0].c", json_equals="hit"), "json"),
])
def test_every_filter_finds_exactly_the_planted_records(spark, snapshot: dict[str, Any], spec: SearchSpec,
                                                        kind: str):
    result = run_search(spark, snapshot, spec, split_bytes=1024 * 1024)
    assert result.scanned == N and result.records_read == N and not result.torn
    assert result.matched == len(PLANTS[kind]) and not result.truncated
    got = sorted(int.from_bytes(bytes(r["body"])[-4:], "big") for r in result.rows) if kind == "raw" else None
    if kind == "raw":
        assert got == PLANTS["raw"]
    elif kind in ("key",):
        assert sorted(int(r["keys"][0][1:]) for r in result.rows) == PLANTS[kind]
    else:
        assert sorted(r["phy_offset"] for r in result.rows) == [r["phy_offset"] for r in result.rows]
        assert len(result.rows) == len(PLANTS[kind])


def test_topic_and_time_range_limit_scanned_counts_and_exports(spark, snapshot: dict[str, Any], tmp_path: Path):
    lo, hi = T0 + 500, T0 + 1499  # batches 50..149 -> indexes 50_000..149_999
    in_range = [i for i in range(50_000, 150_000) if i % 3 == 0]  # Beta
    progress: list[dict[str, Any]] = []
    spec = SearchSpec(topics=["Beta"], begin_ms=lo, end_ms=hi, tag="needle-tag || common", limit=10)
    result = run_search(spark, snapshot, spec, progress=progress.append, job_group="test-search",
                        output_dir=str(tmp_path / "out"), split_bytes=512 * 1024)
    assert result.records_read == N and result.scanned == len(in_range) == result.matched
    assert result.truncated and len(result.rows) == 10
    assert progress[-1]["fraction"] == 1.0 and progress[-1]["bytes_scanned"] == progress[-1]["bytes_total"]
    lines = Path(result.outputs["jsonl"]).read_text().splitlines()
    assert len(lines) == 10 and json.loads(lines[0])["topic"] == "Beta"
    with open(result.outputs["csv"], newline="") as f:
        assert len(list(csv.DictReader(f))) == 10
    tagged = run_search(spark, snapshot, SearchSpec(topics=["Beta"], begin_ms=lo, end_ms=hi, tag="needle-tag"))
    assert tagged.matched == len([i for i in _planted("tag", "Beta") if 50_000 <= i < 150_000])
