"""Full-scan body-substring search over N GiB of 1 KiB messages: Spark local mode vs one Python process.

    python -m bench.scan [--gib 2] [--segment-mib 256] [--split-mib 64] [--dir DIR]

Writes the store with the broker's MessageStore, takes a snapshot with the broker's snapshot code, then scans
the same snapshot files twice with the same per-split scan (``spark_jobs.transforms.scan.scan_split``, which
decodes with ``broker_core.codec``): once in this process, split after split, and once as a Spark job on
``local[*]`` (session start excluded, a warm-up job first). Prints MB/s, MB/s per core and the ratio.
Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from broker_core.config import BrokerConfig
from broker_core.store import MessageStore
from broker_core.store.message import MessageInner
from broker_core.store.snapshot import SegmentSnapshots
from spark_jobs.jobs.search import run_search
from spark_jobs.segments import plan_splits, segments_from_manifest
from spark_jobs.session import build_session
from spark_jobs.transforms.filters import Compiled, SearchSpec
from spark_jobs.transforms.scan import scan_split

NEEDLE = "needle-7f3a"


def fill(store_dir: Path, gib: float, segment_mib: int) -> dict:
    cfg = BrokerConfig().with_store_dir(store_dir)
    cfg.mapped_file_size_commit_log_bytes = segment_mib * 1024 * 1024
    cfg.message_index_enable = False
    cfg.warm_mapped_file_enable = False
    store = MessageStore(cfg.validate(), background=False).start()
    filler = os.urandom(512).hex().encode()[:1000]
    n = int(gib * (1 << 30) / 1100)
    try:
        batch = []
        for i in range(n):
            body = filler if i % 50_000 else filler[:900] + NEEDLE.encode() + filler[:89]
            batch.append(MessageInner("Bench", body, i % 8, keys=f"k{i}"))
            if len(batch) == 1000:
                store.put_messages(batch)
                batch = []
        if batch:
            store.put_messages(batch)
        return SegmentSnapshots(store.commit_log, store_dir / "snapshots", store.clock.now_ms).take()
    finally:
        store.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.scan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="data to scan, GiB (default 2)")
    ap.add_argument("--segment-mib", type=int, default=256, help="CommitLog segment size, MiB")
    ap.add_argument("--split-mib", type=int, default=64, help="bytes per Spark task, MiB")
    ap.add_argument("--dir", help="work directory (default a temp dir, removed after)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-scan-"))
    try:
        t = time.perf_counter()
        manifest = fill(work / "store", args.gib, args.segment_mib)
        total = manifest["totalBytes"]
        print(f"wrote {total / 1e6:.0f} MB in {len(manifest['segments'])} segments in {time.perf_counter() - t:.1f} s")
        segments = segments_from_manifest(manifest)
        splits = plan_splits(segments, args.split_mib << 20)
        spec = SearchSpec(body_contains=NEEDLE)

        t = time.perf_counter()
        matched = scanned = 0
        for sp in splits:
            st, _ = scan_split(sp, Compiled(spec))
            matched += st.extra["matched"]
            scanned += st.scanned
        single = time.perf_counter() - t

        spark = build_session("bench-scan", conf={"spark.ui.enabled": "false"})
        cores = spark.sparkContext.defaultParallelism
        run_search(spark, segments[:1], spec, split_bytes=args.split_mib << 20)  # warm-up: python workers
        t = time.perf_counter()
        result = run_search(spark, segments, spec, split_bytes=args.split_mib << 20)
        par = time.perf_counter() - t
        spark.stop()
        assert result.matched == matched and result.scanned == scanned, (result.summary(), matched, scanned)
        mb = total / 1e6
        print(f"records {scanned}, matches {matched}, splits {len(splits)}, cores {cores}")
        print(f"single process: {single:.2f} s, {mb / single:.0f} MB/s")
        print(f"spark local[*]: {par:.2f} s, {mb / par:.0f} MB/s, {mb / par / cores:.0f} MB/s per core")
        print(f"ratio spark / single process: {single / par:.2f}x (target >= 1.5x)")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
