"""Store benchmarks (not tests): ``python -m bench.store`` (or ``make bench``).

Each figure is printed with the baseline measured in the same run, as a ratio:
1. put_message with dispatch, ASYNC_FLUSH, 1 KiB bodies (one call per message, and batches of 32)
   vs a raw mmap append of the same record bytes;
2. SYNC_FLUSH with 64 concurrent writers (group commit) vs one fdatasync per message;
3. key lookup among N indexed messages: p50/p99 latency;
4. recovery after SIGKILL with ~1 GiB of CommitLog.
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from broker_core.codec.message import encode_record
from broker_core.config import BrokerConfig
from broker_core.store import MessageStore
from broker_core.store.message import MessageInner

BODY = os.urandom(1024)
ROOT = Path(__file__).resolve().parent.parent


def config(store_dir: Path, **kw: object) -> BrokerConfig:
    cfg = BrokerConfig().with_store_dir(store_dir)
    cfg.retention.clean_resource_interval_ms = 0
    for k, v in kw.items():
        cfg.set_field(k, v)
    return cfg.validate()


def raw_mmap_append(n: int, workdir: Path) -> float:
    """Baseline: copy pre-encoded records into a warmed, pre-allocated mmap."""
    record = encode_record(topic="BenchTopic", body=BODY, properties={"UNIQ_KEY": "0" * 32, "KEYS": "k-00000000"})
    size = len(record) * n + 4096
    path = workdir / "raw.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, size)
    mm = mmap.mmap(fd, size)
    zeros = bytes(1 << 20)  # warm it as the store's pre-allocation does
    for off in range(0, size, 1 << 20):
        os.pwrite(fd, zeros[: min(1 << 20, size - off)], off)
    os.fdatasync(fd)
    mv = memoryview(mm)
    rl = len(record)
    t0 = time.perf_counter()
    pos = 0
    for _ in range(n):
        mv[pos:pos + rl] = record
        pos += rl
    dt = time.perf_counter() - t0
    mv.release()
    mm.close()
    os.close(fd)
    path.unlink()
    return n / dt


def warm_up(store: MessageStore) -> None:
    """Wait until the first segment is prepared, put once, and wait for the next one (steady state)."""
    if store.allocator is not None:
        store.allocator.wait_idle()
    store.put_message(MessageInner("Warmup", b"x"))
    store.dispatch()
    if store.allocator is not None:
        store.allocator.wait_idle()


def put_with_dispatch(n: int, workdir: Path, batch: int) -> float:
    d = workdir / f"async-{batch}"
    store = MessageStore(config(d)).start()
    msgs = [MessageInner("BenchTopic", BODY, i % 8, keys=f"k-{i:08d}", uniq_key=f"{i:032X}") for i in range(n)]
    warm_up(store)
    t0 = time.perf_counter()
    if batch == 1:
        put = store.put_message
        for m in msgs:
            put(m)
    else:
        for i in range(0, n, batch):
            store.put_messages(msgs[i:i + batch])
    assert store.dispatch(timeout=120)
    dt = time.perf_counter() - t0
    assert store.get_max_offset_in_queue("BenchTopic", 0) == (n + 7) // 8
    store.shutdown()
    shutil.rmtree(d)
    return n / dt


def fdatasync_per_message(n: int, workdir: Path) -> float:
    path = workdir / "fsync.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    record = encode_record(topic="BenchTopic", body=BODY)
    t0 = time.perf_counter()
    for _ in range(n):
        os.write(fd, record)
        os.fdatasync(fd)
    dt = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    return n / dt


def sync_flush_writers(n: int, workdir: Path, writers: int) -> tuple[float, int]:
    d = workdir / "sync"
    store = MessageStore(config(d, flush_disk_type="SYNC_FLUSH")).start()
    warm_up(store)
    per = n // writers
    timeouts = [0]
    barrier = threading.Barrier(writers + 1)

    def work(w: int) -> None:
        barrier.wait()
        bad = 0
        for _ in range(per):
            r = store.put_message(MessageInner("SyncTopic", BODY, w % 8))
            bad += not r.ok
        timeouts[0] += bad

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    store.shutdown()
    shutil.rmtree(d)
    return per * writers / dt, timeouts[0]


def sync_flush_async_writers(n: int, workdir: Path, writers: int) -> tuple[float, int]:
    """64 asyncio writers on one event loop (how the broker server serves producers): each appends, then
    awaits its group-commit request's future (the flush thread resolves a commit's futures in one call). The loop
    is the broker's (``loops.loop_factory``: uvloop where installed) and, as in a broker process, the GIL switch
    interval is lowered (``loops.lower_switch_interval``) while the row runs, then put back."""
    import asyncio
    import sys

    from broker_core.remoting.loops import loop_factory, lower_switch_interval

    d = workdir / "sync-async"
    store = MessageStore(config(d, flush_disk_type="SYNC_FLUSH")).start()
    warm_up(store)
    per = n // writers
    bad = [0]

    async def writer(w: int) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(per):
            results, request = store.put_messages_nowait([MessageInner("SyncTopic", BODY, w % 8)])
            if not await request.future(loop) or not results[0].ok:
                bad[0] += 1

    async def run() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        return time.perf_counter() - t0

    interval = sys.getswitchinterval()
    lower_switch_interval()
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            dt = runner.run(run())
    finally:
        sys.setswitchinterval(interval)
    store.shutdown()
    shutil.rmtree(d)
    return per * writers / dt, bad[0]


def key_lookup(n: int, workdir: Path, lookups: int) -> tuple[float, float, float]:
    d = workdir / "lookup"
    store = MessageStore(config(d)).start()
    batch = []
    for i in range(n):
        batch.append(MessageInner("KeyTopic", BODY[:100], i % 8, keys=f"order-{i}"))
        if len(batch) == 256:
            store.put_messages(batch)
            batch = []
    if batch:
        store.put_messages(batch)
    assert store.dispatch(timeout=300)
    rnd = random.Random(7)
    lat = []
    for _ in range(lookups):
        k = rnd.randrange(n)
        t0 = time.perf_counter()
        res = store.query_message("KeyTopic", f"order-{k}")
        lat.append(time.perf_counter() - t0)
        assert len(res.messages) == 1 and res.messages[0].keys == [f"order-{k}"]
    store.shutdown()
    shutil.rmtree(d)
    lat.sort()
    return statistics.median(lat) * 1000, lat[int(len(lat) * 0.99)] * 1000, lat[-1] * 1000


def recovery_after_sigkill(gib: float, workdir: Path) -> tuple[float, int, bool]:
    d = workdir / "recover"
    proc = subprocess.Popen([sys.executable, "-m", "bench.fill_and_wait", str(d), str(gib)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("FILLED"), line
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t0 = time.perf_counter()
    store = MessageStore(config(d)).start()
    dt = time.perf_counter() - t0
    size = store.commit_log.max_offset()
    abnormal = not store.last_exit_ok
    store.shutdown()
    shutil.rmtree(d)
    return dt, size, abnormal


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=300_000, help="messages for the put benchmarks")
    p.add_argument("--sync-messages", type=int, default=64_000, help="messages for the SYNC_FLUSH benchmark")
    p.add_argument("--index-messages", type=int, default=1_000_000, help="indexed messages for the lookup benchmark")
    p.add_argument("--recovery-gib", type=float, default=1.0, help="CommitLog size for the recovery benchmark")
    p.add_argument("--only", choices=["put", "sync", "lookup", "recovery"], action="append")
    p.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temp dir)")
    args = p.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-store-"))
    workdir.mkdir(parents=True, exist_ok=True)
    only = set(args.only or ["put", "sync", "lookup", "recovery"])
    print(f"# bench.store on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, workdir {workdir}")
    try:
        if "put" in only:
            raw = raw_mmap_append(args.messages, workdir)
            single = put_with_dispatch(args.messages, workdir, 1)
            batched = put_with_dispatch(args.messages, workdir, 32)
            print(f"raw mmap append (1 KiB records)        {raw:12,.0f} msg/s")
            print(f"put_message + dispatch, ASYNC_FLUSH   {single:12,.0f} msg/s  ratio to raw {single / raw:.3f}"
                  f"  target 500k: {'MET' if single >= 500_000 else 'MISSED'}")
            print(f"put_messages(32) + dispatch, ASYNC     {batched:12,.0f} msg/s  ratio to raw {batched / raw:.3f}"
                  f"  target 500k: {'MET' if batched >= 500_000 else 'MISSED'}")
        if "sync" in only:
            base = fdatasync_per_message(min(args.sync_messages, 5000), workdir)
            rate, bad = sync_flush_writers(args.sync_messages, workdir, 64)
            arate, abad = sync_flush_async_writers(args.sync_messages, workdir, 64)
            print(f"one fdatasync per message              {base:12,.0f} msg/s")
            print(f"SYNC_FLUSH, 64 writer threads          {rate:12,.0f} msg/s  "
                  f"ratio to fdatasync/msg {rate / base:.1f}"
                  f"  not-OK puts {bad}  target 10x: {'MET' if rate >= 10 * base else 'MISSED'}")
            print(f"SYNC_FLUSH, 64 asyncio writers         {arate:12,.0f} msg/s  "
                  f"ratio to fdatasync/msg {arate / base:.1f}"
                  f"  not-OK puts {abad}  target 10x: {'MET' if arate >= 10 * base else 'MISSED'}")
        if "lookup" in only:
            p50, p99, worst = key_lookup(args.index_messages, workdir, 10_000)
            print(f"key lookup among {args.index_messages:,} indexed      p50 {p50:.3f} ms  p99 {p99:.3f} ms  "
                  f"max {worst:.3f} ms  target p99 < 1 ms: {'MET' if p99 < 1 else 'MISSED'}")
        if "recovery" in only:
            dt, size, abnormal = recovery_after_sigkill(args.recovery_gib, workdir)
            print(f"recovery after SIGKILL, {size / 2**30:.2f} GiB CommitLog  {dt:.2f} s  abnormal path: {abnormal}"
                  f"  target < 2 s: {'MET' if dt < 2 else 'MISSED'}")
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
