"""Full-scan body-substring search over N GiB of 1 KiB messages: the two engines and the two ways to read segments.

    python -m bench.scan [--gib 2] [--segment-mib 256] [--split-mib 128] [--repeat 3] [--dir DIR] [--no-spark]

Writes the store with the broker's MessageStore, starts a real broker process on it and takes a snapshot with
the admin operation (SNAPSHOT_SEGMENTS), then scans the snapshot with the jobs' own search
(``spark_jobs.jobs.search.run_search``, which decodes with ``broker_core.codec``):

- the worker engine (``spark_jobs.runner.InProcess``: what a job below ``SPARK_LOCAL_THRESHOLD_BYTES`` runs, one
  process, no Spark) reading the snapshot's files, and the same engine fetching every byte from the broker
  (READ_SNAPSHOT_SEGMENT, ``spark_jobs.remote``): the networked / local-file ratio (target >= 0.7x);
- Spark ``local[*]`` the same two ways (unless ``--no-spark``), and Spark against the worker engine.

Each side first runs once untimed (page cache, imports, Spark's Python workers and the JVM's JIT), then
``--repeat`` timed runs whose median is reported; Spark's session start is printed apart and excluded. Prints
MB/s and the ratios. Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_core.client import AdminClient
from broker_core.config import BrokerConfig
from broker_core.store import MessageStore
from broker_core.store.message import MessageInner
from spark_jobs.jobs.search import SearchResult, run_search
from spark_jobs.runner import InProcess
from spark_jobs.segments import DEFAULT_SPLIT_BYTES
from spark_jobs.transforms.filters import SearchSpec

NEEDLE = "needle-7f3a"


def fill(store_dir: Path, gib: float, segment_mib: int) -> None:
    cfg = BrokerConfig().with_store_dir(store_dir)
    cfg.store.mapped_file_size_commit_log_bytes = segment_mib * 1024 * 1024
    cfg.store.message_index_enable = False
    cfg.store.warm_mapped_file_enable = False
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
    finally:
        store.shutdown()


def start_broker(work: Path, segment_mib: int, cpus: set[int] | None = None
                 ) -> tuple[subprocess.Popen, str]:  # type: ignore[type-arg]
    """A broker process on the filled store (same segment size), on ``cpus`` if given; returns it and its
    address."""
    conf = work / "broker.conf"
    conf.write_text(f"mapedFileSizeCommitLog={segment_mib * 1024 * 1024}\nmessageIndexEnable=false\n"
                    "warmMapedFileEnable=false\nbrokerName=bench-scan\n")
    proc = subprocess.Popen([sys.executable, "-m", "broker_core", "--store-dir", str(work / "store"), "--listen",
                             "127.0.0.1:0", "--namesrv", "127.0.0.1:1", "--config", str(conf), "--log-level",
                             "WARNING"], stdout=subprocess.PIPE, stderr=open(work / "broker.log", "ab"),
                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("READY port="):
        proc.kill()
        raise RuntimeError(f"the broker did not start: {line!r}; {(work / 'broker.log').read_text()[-2000:]}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    ports = dict(field.split("=", 1) for field in line.split()[1:])
    return proc, f"127.0.0.1:{ports['port']}"


def timed(label: str, fn: Callable[[], SearchResult], repeat: int) -> tuple[float, SearchResult]:
    fn()  # warm-up
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    print(f"  {label}: runs {[round(x, 3) for x in times]} s")
    assert result is not None
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.scan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="data to scan, GiB (default 2)")
    ap.add_argument("--segment-mib", type=int, default=256, help="CommitLog segment size, MiB")
    ap.add_argument("--split-mib", type=int, default=DEFAULT_SPLIT_BYTES >> 20,
                    help=f"bytes per split, MiB (default the jobs' {DEFAULT_SPLIT_BYTES >> 20}); Spark tasks group "
                         "splits, SPARK_JOBS_TASKS_PER_CORE (2) tasks per core")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each side; the median is reported (3)")
    ap.add_argument("--no-spark", action="store_true", help="the worker engine only")
    ap.add_argument("--pin", action="store_true",
                    help="the broker on the last CPU, this process on the others: the broker's work off the reader's "
                         "cores, as when it runs on its own host (both read paths measured the same way)")
    ap.add_argument("--dir", help="work directory (default a temp dir, removed after)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-scan-"))
    broker = None
    try:
        t = time.perf_counter()
        fill(work / "store", args.gib, args.segment_mib)
        print(f"filled the store in {time.perf_counter() - t:.1f} s")
        cpus = sorted(os.sched_getaffinity(0))
        pinned = args.pin and len(cpus) > 1
        broker, addr = start_broker(work, args.segment_mib, {cpus[-1]} if pinned else None)
        if pinned:
            os.sched_setaffinity(0, set(cpus[:-1]))
            print(f"pinned: broker on CPU {cpus[-1]}, this process on {cpus[:-1]}")
        admin = AdminClient("127.0.0.1:1")
        manifest = admin.snapshot_segments(addr)
        networked: dict[str, Any] = {**manifest, "brokerAddr": addr, "preferLocal": False}
        total = manifest["totalBytes"]
        mb = total / 1e6
        print(f"snapshot: {mb:.0f} MB in {len(manifest['segments'])} segments, broker {addr}")
        spec = SearchSpec(body_contains=NEEDLE)
        split = args.split_mib << 20
        worker = InProcess()
        print("worker engine (one process, no Spark):")
        local_s, local_r = timed("local files", lambda: run_search(worker, manifest, spec, split_bytes=split),
                                 args.repeat)
        net_s, net_r = timed("networked", lambda: run_search(worker, networked, spec, split_bytes=split),
                             args.repeat)
        assert (net_r.matched, net_r.scanned) == (local_r.matched, local_r.scanned)
        print(f"records {local_r.scanned}, matches {local_r.matched}, splits {local_r.splits}")
        print(f"worker engine, local files: {local_s:.3f} s, {mb / local_s:.0f} MB/s")
        print(f"worker engine, networked:   {net_s:.3f} s, {mb / net_s:.0f} MB/s")
        print(f"ratio networked / local files (worker engine): {local_s / net_s:.2f}x (target >= 0.7x)")
        if not args.no_spark:
            from spark_jobs.session import build_session

            t = time.perf_counter()
            spark = build_session("bench-scan", conf={"spark.ui.enabled": "false"})
            print(f"spark session start: {time.perf_counter() - t:.1f} s (excluded below)")
            cores = spark.sparkContext.defaultParallelism
            print(f"spark local[*] ({cores} cores):")
            sl_s, sl_r = timed("local files", lambda: run_search(spark, manifest, spec, split_bytes=split),
                               args.repeat)
            sn_s, sn_r = timed("networked", lambda: run_search(spark, networked, spec, split_bytes=split),
                               args.repeat)
            spark.stop()
            assert (sl_r.matched, sn_r.matched) == (local_r.matched, local_r.matched)
            print(f"spark, local files: {sl_s:.3f} s, {mb / sl_s:.0f} MB/s, {mb / sl_s / cores:.0f} MB/s per core")
            print(f"spark, networked:   {sn_s:.3f} s, {mb / sn_s:.0f} MB/s")
            print(f"ratio networked / local files (spark): {sl_s / sn_s:.2f}x (target >= 0.7x)")
            print(f"ratio spark / worker engine (local files): {local_s / sl_s:.2f}x (Spark pays off only above "
                  "SPARK_LOCAL_THRESHOLD_BYTES)")
        admin.release_snapshot(addr, manifest["snapshotId"])
        admin.shutdown()
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(timeout=30)
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
