"""Recovery quarantine in-process: a bad record in a middle segment moves the later segments aside, with a
report; a torn tail (the last record a killed writer left half done) is only cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.store import GetStatus, MessageStore
from broker_core.store.message import MessageInner

SEG = 16 * 1024


def _write(store, n: int) -> list:  # type: ignore[no-untyped-def]
    out = [store.put_message(MessageInner("Q", b"msg-%05d" % i + b"." * 400, i % 2, keys=f"k{i}")) for i in range(n)]
    store.dispatch()
    return out


def _bodies(store) -> list[bytes]:  # type: ignore[no-untyped-def]
    out = []
    for qid in range(2):
        offset = 0
        while True:
            res = store.get_message("Q", qid, offset, 32)
            if res.status is not GetStatus.FOUND:
                break
            out.extend(m.body[:9] for m in res.messages)
            offset = res.next_begin_offset
    return sorted(out)


def _segments(cfg) -> list[Path]:  # type: ignore[no-untyped-def]
    return sorted(cfg.store.commit_log_dir.iterdir())


@pytest.mark.parametrize("abnormal", [False, True])
def test_a_bad_middle_record_quarantines_the_later_segments_with_a_report(open_store, clock, abnormal):
    store = open_store(mapped_file_size_commit_log_bytes=SEG)
    results = _write(store, 300)
    cfg = store.config
    store.shutdown()
    segs = _segments(cfg)
    assert len(segs) >= 8
    victim_seg = segs[-3]  # walked by a normal recovery too (the last three segments)
    in_seg = [r for r in results if r.phy_offset // SEG == int(victim_seg.name) // SEG]
    victim = in_seg[len(in_seg) // 2]
    before = {p.name: p.read_bytes() for p in segs}
    with open(victim_seg, "r+b") as fh:  # flip body bytes: the CRC no longer matches
        fh.seek(victim.phy_offset % SEG + 120)
        fh.write(b"\xff\xfe\xfd\xfc")
    if abnormal:
        cfg.store.abort_path.touch()
        cfg.store.checkpoint_path.unlink()  # walk everything
    again = MessageStore(cfg, clock, background=False).start()
    try:
        (folder,) = (Path(cfg.store.store_path_root_dir) / "quarantine").iterdir()
        assert again.runtime_info()["quarantined"] == str(folder)
        moved = {p.name for p in folder.iterdir()}
        assert moved == {victim_seg.name, segs[-2].name, segs[-1].name, "REPORT.txt"}
        for name in (segs[-2].name, segs[-1].name):
            assert (folder / name).read_bytes() == before[name]  # unchanged, nothing deleted
            assert not (cfg.store.commit_log_dir / name).exists()
        assert (folder / victim_seg.name).read_bytes()[:victim.phy_offset % SEG] == before[victim_seg.name][
            :victim.phy_offset % SEG]
        report = (folder / "REPORT.txt").read_text()
        assert f"offset {victim.phy_offset}" in report and "body CRC mismatch" in report
        assert "Nothing was deleted" in report
        kept = [r for r in results if r.phy_offset < victim.phy_offset]
        assert again.commit_log.max_offset() == victim.phy_offset
        assert _bodies(again) == sorted(b"msg-%05d" % i for i in range(len(kept)))
        assert again.query_message("Q", f"k{len(kept)}").messages == []
        r = again.put_message(MessageInner("Q", b"after", 0, keys="after"))
        assert r.ok and r.phy_offset == victim.phy_offset
        again.dispatch()
        assert [m.body for m in again.query_message("Q", "after").messages] == [b"after"]
    finally:
        again.shutdown()


def test_a_torn_last_record_is_cut_without_quarantine(open_store, clock):
    store = open_store(mapped_file_size_commit_log_bytes=SEG)
    results = _write(store, 100)
    cfg = store.config
    store.shutdown()
    last = results[-1]
    seg = cfg.store.commit_log_dir / f"{last.phy_offset - last.phy_offset % SEG:020d}"
    with open(seg, "r+b") as fh:  # the writer died while copying the body: the tail of the record is zeros
        fh.seek(last.phy_offset % SEG + last.size - 50)
        fh.write(bytes(50))
    cfg.store.abort_path.touch()
    again = MessageStore(cfg, clock, background=False).start()
    try:
        assert not (Path(cfg.store.store_path_root_dir) / "quarantine").exists()
        assert again.runtime_info()["quarantined"] == ""
        assert again.commit_log.max_offset() == last.phy_offset
        assert len(_bodies(again)) == 99
    finally:
        again.shutdown()


def test_zeros_in_the_middle_with_data_after_them_are_damage(open_store, clock):
    """A zeroed page (a write-back lost in a power loss) ends the walk like the end of data, but the later
    segments hold records: they are quarantined, not deleted."""
    store = open_store(mapped_file_size_commit_log_bytes=SEG)
    results = _write(store, 200)
    cfg = store.config
    store.shutdown()
    segs = _segments(cfg)
    victim = next(r for r in results if r.phy_offset // SEG == int(segs[-2].name) // SEG and r.phy_offset % SEG)
    with open(segs[-2], "r+b") as fh:
        fh.seek(victim.phy_offset % SEG)
        fh.write(bytes(SEG - victim.phy_offset % SEG))
    again = MessageStore(cfg, clock, background=False).start()
    try:
        (folder,) = (Path(cfg.store.store_path_root_dir) / "quarantine").iterdir()
        assert (folder / segs[-1].name).exists() and not (cfg.store.commit_log_dir / segs[-1].name).exists()
        assert again.commit_log.max_offset() == victim.phy_offset
    finally:
        again.shutdown()
