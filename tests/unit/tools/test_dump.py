from __future__ import annotations

import json

from broker_core.store.message import MessageInner
from broker_core.tools.dump import main


def test_dump_lists_segments_queues_index_and_records(open_store, capsys):
    store = open_store()
    for i in range(60):
        store.put_message(MessageInner("Dumped", b"payload-%d" % i + b"-" * 2000, i % 2, keys=f"k{i}"))
    store.dispatch()
    cfg = store.config
    store.shutdown()
    assert main([str(cfg.store.store_path_root_dir), "--json", "--records", "3"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "store" and rows[0]["abort"] is False
    records = [r for r in rows if r["kind"] == "record"]
    assert [r["body"][:9] for r in records] == ["payload-0", "payload-1", "payload-2"]
    segments = [r for r in rows if r["kind"] == "segment"]
    assert len(segments) >= 2 and sum(s["records"] for s in segments) == 60
    queues = {(r["topic"], r["queue_id"]): r["units"] for r in rows if r["kind"] == "queue"}
    assert queues == {("Dumped", 0): 30, ("Dumped", 1): 30}
    assert sum(r["entries"] for r in rows if r["kind"] == "index") == 60


def test_dump_reports_corruption_with_file_and_position(open_store, capsys):
    store = open_store()
    r = [store.put_message(MessageInner("C", b"z" * 100)) for _ in range(3)][-1]
    cfg = store.config
    store.shutdown()
    seg = cfg.store.commit_log_dir / f"{0:020d}"
    with open(seg, "r+b") as fh:
        fh.seek(r.phy_offset + 90)
        fh.write(b"\xff\xff")
    assert main([str(cfg.store.store_path_root_dir)]) == 0
    out = capsys.readouterr().out
    assert "CRC mismatch" in out and str(seg) in out and f"position {r.phy_offset}" in out


def test_dump_rejects_a_missing_dir(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
