"""Segment snapshots (``broker_core.store.snapshot``): hard links with byte bounds, expiry by TTL on the store's
clock, leftovers of a crash mid-write, release, and ids that would escape the snapshots directory."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.store import MessageStore
from broker_core.store.clock import ManualClock
from broker_core.store.message import MessageInner
from broker_core.store.snapshot import MANIFEST, SegmentSnapshots


def _fill(store: MessageStore, n: int) -> None:
    for i in range(n):
        assert store.put_message(MessageInner("Snap", f"m{i}".encode() + b"x" * 1000)).ok
    store.reput.do_reput()


@pytest.fixture
def snaps(open_store: Callable[..., MessageStore], tmp_path: Path, clock: ManualClock) -> SegmentSnapshots:
    store = open_store()
    _fill(store, 150)  # 64 KiB segments: a few sealed ones and an active one
    return SegmentSnapshots(store.commit_log, tmp_path / "snapshots", clock.now_ms)


def test_links_every_segment_with_its_bound(snaps: SegmentSnapshots) -> None:
    manifest = snaps.take(snapshot_id="s1")
    segs = manifest["segments"]
    assert len(segs) >= 3 and [s["sealed"] for s in segs] == [True] * (len(segs) - 1) + [False]
    for s in segs:
        st = os.stat(s["path"])
        assert st.st_nlink >= 2  # a hard link, not a copy
        assert 0 < s["bound"] <= s["fileSize"]
    active = snaps.commit_log.mapped_file_queue.last()
    assert segs[-1]["bound"] == active.read_position  # the readable prefix, nothing past it
    assert json.loads((Path(manifest["exportDir"]) / MANIFEST).read_text())["snapshotId"] == "s1"
    with pytest.raises(FileExistsError):
        snaps.take(snapshot_id="s1")


def test_expired_snapshots_and_crash_leftovers_are_removed(snaps: SegmentSnapshots, clock: ManualClock) -> None:
    old = snaps.take(snapshot_id="old", ttl_ms=1000)
    keep = snaps.take(snapshot_id="keep", ttl_ms=10_000)
    (snaps.root / "torn.tmp").mkdir()  # a take() that died before its rename
    clock.advance(1000)
    assert sorted(snaps.clean_expired()) == ["old", "torn.tmp"]
    assert not Path(old["exportDir"]).exists() and Path(keep["exportDir"]).exists()
    clock.advance(9000)
    snaps.take(snapshot_id="new")  # taking a snapshot cleans expired ones first
    assert [m["snapshotId"] for m in snaps.list()] == ["new"]


def test_release_and_bad_ids(snaps: SegmentSnapshots) -> None:
    m = snaps.take()
    assert snaps.release(m["snapshotId"]) is True and not Path(m["exportDir"]).exists()
    assert snaps.release(m["snapshotId"]) is False
    for bad in ("../escape", "a/b", "x.tmp", "..", ""):
        with pytest.raises(ValueError):
            snaps.release(bad) if bad else snaps._dir_of(bad)
    with pytest.raises(ValueError):
        snaps.take(snapshot_id=str(snaps.root.parent / "elsewhere"))


def test_a_snapshot_outlives_retention_of_its_segments(snaps: SegmentSnapshots) -> None:
    m = snaps.take(snapshot_id="held")
    first = m["segments"][0]
    before = Path(first["path"]).read_bytes()[:first["bound"]]
    original = snaps.commit_log.mapped_file_queue.first()
    os.unlink(original.path)  # what retention's delete does to the store's name
    assert Path(first["path"]).read_bytes()[:first["bound"]] == before


def test_network_reads_stay_within_the_bound_and_need_the_token(snaps: SegmentSnapshots) -> None:
    """What READ_SNAPSHOT_SEGMENT serves (invariant 6): the link's bytes below the bound, for the token only."""
    manifest = snaps.take(snapshot_id="net")
    token = manifest["readToken"]
    assert len(token) == 32 and snaps.take(snapshot_id="net2")["readToken"] != token
    active = manifest["segments"][-1]
    on_disk = Path(active["path"]).read_bytes()
    assert snaps.read("net", active["fileName"], 0, 1 << 30, token) == (on_disk[:active["bound"]], active["bound"])
    assert snaps.read("net", active["fileName"], active["bound"] - 10, 100, token)[0] == \
        on_disk[active["bound"] - 10:active["bound"]]
    assert snaps.read("net", active["fileName"], active["bound"], 100, token) == (b"", active["bound"])
    with pytest.raises(PermissionError):
        snaps.read("net", active["fileName"], 0, 10, "0" * 32)
    with pytest.raises(PermissionError):
        snaps.read("net", active["fileName"], 0, 10, "")
    with pytest.raises(LookupError):
        snaps.read("net", "00000000000000999999", 0, 10, token)
    with pytest.raises(ValueError):
        snaps.read("net", active["fileName"], -1, 10, token)
    assert snaps.release("net")
    with pytest.raises(LookupError):
        snaps.read("net", active["fileName"], 0, 10, token)
