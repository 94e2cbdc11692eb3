"""Crash tests with a real subprocess: append, SIGKILL, reopen. Every put that returned OK must be
readable exactly once through its queue and through its key, and the abnormal-recovery path must run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_core.store import GetStatus, MessageStore
from tests.conftest import ROOT, small_config

pytestmark = pytest.mark.integration


def run_and_kill(store_dir: Path, flush_type: str, acks_wanted: int, threads: int) -> list[tuple[int, int, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.crash_writer", str(store_dir), flush_type, str(threads)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    acks = []
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ACK"):
                _, n, qid, qoff = line.split()
                acks.append((int(n), int(qid), int(qoff)))
                if len(acks) >= acks_wanted:
                    break
            assert time.monotonic() < deadline, "writer too slow"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    assert (store_dir / "abort").exists()
    return acks


@pytest.mark.parametrize("flush_type,threads", [("ASYNC_FLUSH", 1), ("SYNC_FLUSH", 4)])
def test_sigkill_loses_no_acknowledged_message(tmp_path, flush_type, threads):
    store_dir = tmp_path / "store"
    acks = run_and_kill(store_dir, flush_type, 3000, threads)
    cfg = small_config(store_dir, flush_disk_type=flush_type, mapped_file_size_commit_log_bytes=256 * 1024,
                       mapped_file_size_consume_queue_bytes=20 * 1000, max_index_num=5000, max_hash_slot_num=1000)
    store = MessageStore(cfg, background=False).start()
    try:
        assert store.last_exit_ok is False  # the abort path ran
        by_queue: dict[int, list[bytes]] = {}
        for qid in range(4):
            offset = 0
            seen = by_queue.setdefault(qid, [])
            while True:
                res = store.get_message("Crash", qid, offset, 32)
                if res.status is not GetStatus.FOUND:
                    assert res.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE)
                    break
                seen.extend(m.body[:13] for m in res.messages)
                assert [m.queue_offset for m in res.messages] == res.queue_offsets
                offset = res.next_begin_offset
        for qid, bodies in by_queue.items():
            assert len(bodies) == len(set(bodies)), f"duplicates in queue {qid}"
        everything = {b for bodies in by_queue.values() for b in bodies}
        for n, qid, qoff in acks:
            body = b"body-%08d" % n
            assert body in by_queue[qid], f"acknowledged message {n} lost"
            assert by_queue[qid].index(body) == qoff
            hits = store.query_message("Crash", f"key-{n}").messages
            assert [m.body[:13] for m in hits] == [body], f"key-{n}"
        for n, _, _ in acks[:: max(1, len(acks) // 50)]:
            assert [m.body[:13] for m in store.query_message("Crash", f"U{n:08d}").messages] == [b"body-%08d" % n]
        assert len(everything) >= len(acks)
    finally:
        store.shutdown()
    assert not (store_dir / "abort").exists()
