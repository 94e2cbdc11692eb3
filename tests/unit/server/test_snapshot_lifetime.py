"""Snapshot lifetime (broker_core.server.snapshot): a snapshot held past snapshotMaxLifetimeMs is released, links
and all, whatever TTL it asked for."""

from __future__ import annotations

from pathlib import Path

from broker_core.server.snapshot import remove_over_lifetime
from broker_core.store import MessageInner


def test_a_snapshot_past_the_max_lifetime_is_released(open_store) -> None:  # type: ignore[no-untyped-def]
    store = open_store()
    assert store.put_messages([MessageInner("T", b"x" * 100, 0)])[0].ok
    snaps = store.segment_snapshots(lambda: "127.0.0.1:0")
    manifest = snaps.take(ttl_ms=10 ** 12)  # asks for ~30 years
    links = [Path(s["path"]) for s in manifest["segments"]]
    assert links and all(p.exists() for p in links)
    created = manifest["createdMs"]
    assert remove_over_lifetime(snaps, 60_000, now_ms=created + 59_999) == []
    assert all(p.exists() for p in links)
    assert remove_over_lifetime(snaps, 60_000, now_ms=created + 60_000) == [manifest["snapshotId"]]
    assert not any(p.exists() for p in links) and not Path(manifest["exportDir"]).exists()
    assert snaps.list() == []
