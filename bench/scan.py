"""Full-scan body-substring search over N GiB of 1 KiB messages: Spark local mode vs one Python process.

    python -m bench.scan [--gib 2] [--segment-mib 256] [--split-mib 128] [--repeat 3] [--dir DIR]

Writes the store with the broker's MessageStore, takes a snapshot with the broker's snapshot code, then scans
the same snapshot files twice with the same per-split scan (``spark_jobs.transforms.scan.scan_split``, which
decodes with ``broker_core.codec``): once in this process, split after split, and once as a Spark job on
``local[*]``. Each side first runs once untimed (page cache, imports, Spark's Python workers and the JVM's
JIT), then ``--repeat`` timed runs whose median is reported; session start is excluded. Prints MB/s, MB/s per
core and the ratio.
Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from broker_core.config import BrokerConfig
from broker_core.store import MessageStore
from broker_core.store.message import MessageInner
from broker_core.store.snapshot import SegmentSnapshots
from spark_jobs.jobs.search import run_search
from spark_jobs.segments import DEFAULT_SPLIT_BYTES, plan_splits, segments_from_manifest
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
    ap.add_argument("--split-mib", type=int, default=DEFAULT_SPLIT_BYTES >> 20,
                    help=f"bytes per split, MiB (default the jobs' {DEFAULT_SPLIT_BYTES >> 20}); Spark tasks group "
                         "splits, SPARK_JOBS_TASKS_PER_CORE (2) tasks per core")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each side; the median is reported (3)")
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

        def single_pass() -> tuple[float, int, int]:
            t0 = time.perf_counter()
            matched = scanned = 0
            for sp in splits:
                st, _ = scan_split(sp, Compiled(spec))
                matched += st.extra["matched"]
                scanned += st.scanned
            return time.perf_counter() - t0, matched, scanned

        single_pass()  # warm-up: page cache and imports, as for Spark below
        runs = [single_pass() for _ in range(args.repeat)]
        single, matched, scanned = statistics.median(r[0] for r in runs), runs[0][1], runs[0][2]

        spark = build_session("bench-scan", conf={"spark.ui.enabled": "false"})
        cores = spark.sparkContext.defaultParallelism
        # warm-up: a full untimed run, so every core's Python worker is started (and reused, as in a
        # long-running Spark worker) and the JVM's just-in-time compiler has settled
        run_search(spark, segments, spec, split_bytes=args.split_mib << 20)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            result = run_search(spark, segments, spec, split_bytes=args.split_mib << 20)
            times.append(time.perf_counter() - t)
        par = statistics.median(times)
        spark.stop()
        assert result.matched == matched and result.scanned == scanned, (result.summary(), matched, scanned)
        mb = total / 1e6
        print(f"records {scanned}, matches {matched}, splits {len(splits)}, cores {cores}")
        print(f"timed runs (s): single {[round(r[0], 2) for r in runs]}, spark {[round(x, 2) for x in times]}")
        print(f"single process: {single:.2f} s, {mb / single:.0f} MB/s")
        print(f"spark local[*]: {par:.2f} s, {mb / par:.0f} MB/s, {mb / par / cores:.0f} MB/s per core")
        print(f"ratio spark / single process: {single / par:.2f}x (target >= 1.5x)")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
