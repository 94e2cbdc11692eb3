"""Broker benchmark: our broker (namesrv + one broker subprocess, the Python SDK) beside Redis Streams and
NATS JetStream (``bench/peers.py``), same machine, same run, 1 KiB bodies; prints every figure and the
ratios the targets are stated in. ``python -m bench.broker --help``.

Our workloads mirror the peers' (one queue, like one stream):
- ``ours_produce_batched``: ``Producer.asend_batch`` of ``--batch`` messages, 4 batches in flight;
- ``ours_produce_sync``: ``Producer.send`` one at a time (each waits for its reply);
- ``ours_consume``: pre-fill (not timed), then ``PullConsumer.pull`` 1024 at a time until all arrived;
- ``ours_long_poll_wake``: a pull held on an empty queue, then one send: time from the send call to the
  pull's return, 50 rounds;
- ``ours_latency_<rate>``: open-loop paced ``Producer.asend`` at each ``--rate`` (5k and 20k msg/s by default) with
  ``perf_counter_ns`` in the body (each send starts when due, without waiting for earlier replies; the Redis and
  NATS latency rows pace synchronous sends at the first rate); a long-polling pull loop records receive - send,
  in a process of its own (``--consumer process``, bench/consumer_proc.py; ``thread`` puts it on a thread of the
  producer's process, where the two share the GIL, as the peers' rows do); first ``--warmup`` s dropped.
  ``sent/s`` shows the rate the producer actually reached;
- ``paired`` (bench/paired.py): sync send, ours and Redis in alternating rounds with both servers up; the
  sync-send target is stated with the ratio of their medians (single rows a minute apart differ by 20% alone);
- ``floor_rtt_<rate>`` (bench/floor.py): at the first rate, a minimal paced client and echo server (Python on
  uvloop, the same frames, no store, no SDK): send -> response latency, the tail this machine adds by itself.
The broker runs ASYNC_FLUSH (Redis: AOF everysec; JetStream: file storage without per-message fsync).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.consumer_proc import collect
from bench.floor import floor_latency
from bench.paired import describe, paired_sync
from bench.peers import Figures, format_header, format_row, quantiles_ms, run_peers
from broker_core.client import AdminClient, Message, Producer, PullConsumer, SendResult
from broker_core.remoting.client import run_sync

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


class OurBroker:
    """A name server and one broker as subprocesses in a temp dir."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-broker-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        ns_port = self._start([sys.executable, "-m", "broker_core.namesrv", "--listen", "127.0.0.1:0"])
        self.namesrv = f"127.0.0.1:{ns_port}"
        self.port = self._start([sys.executable, "-m", "broker_core", "--store-dir", str(self.tmp / "store"),
                                 "--listen", "127.0.0.1:0", "--namesrv", self.namesrv, "--log-level", "WARNING"])

    def _start(self, args: list[str]) -> int:
        proc = subprocess.Popen(args, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("READY port="):
            raise RuntimeError(f"{args} did not start: {line!r}")
        return int(line.split()[1].split("=")[1])  # READY port=N [grpc_port=M] [metrics_port=K]

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _topic(admin: AdminClient, name: str) -> str:
    admin.create_topic(name, 1, 1)
    return name


def ours_produce_batched(namesrv: str, topic: str, n: int, body: bytes, batch: int = 64, inflight: int = 4) -> Figures:
    producer = Producer("bench-batched", namesrv).start()
    producer.send(Message(topic, body))  # route and connection, not timed
    batches = [[Message(topic, body) for _ in range(min(batch, n - i))] for i in range(0, n, batch)]

    async def run() -> float:
        sem = asyncio.Semaphore(inflight)

        async def one(msgs: list[Message]) -> None:
            async with sem:
                await producer.asend_batch(msgs)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(b) for b in batches))
        return time.perf_counter() - t0

    dt = run_sync(run())
    producer.shutdown()
    return {"msg_per_s": n / dt}


def ours_produce_sync(namesrv: str, topic: str, n: int, body: bytes) -> Figures:
    producer = Producer("bench-sync", namesrv).start()
    producer.send(Message(topic, body))
    t0 = time.perf_counter()
    for _ in range(n):
        producer.send(Message(topic, body))
    dt = time.perf_counter() - t0
    producer.shutdown()
    return {"msg_per_s": n / dt}


def ours_consume(namesrv: str, topic: str, n: int, body: bytes) -> Figures:
    producer = Producer("bench-fill", namesrv).start()
    for i in range(0, n, 256):
        producer.send_batch([Message(topic, body) for _ in range(min(256, n - i))])
    producer.shutdown()
    consumer = PullConsumer("bench-consume", namesrv).start()
    mq = consumer.fetch_queues(topic)[0]
    offset = consumer.min_offset(mq)
    got = 0
    t0 = time.perf_counter()
    while got < n:
        res = consumer.pull(mq, offset, 1024)
        got += len(res.messages)
        offset = res.next_begin_offset
    dt = time.perf_counter() - t0
    consumer.shutdown()
    return {"msg_per_s": n / dt}


def ours_latency(namesrv: str, topic: str, rate: float, seconds: float, body: bytes, warmup: float = 1.0,
                 consumer_in: str = "process") -> Figures:
    """``consumer_in``: "process" (bench/consumer_proc.py, a consumer service of its own) or "thread" (a thread of
    this process, sharing the producer's GIL: its 5 ms switch interval shows in the tail)."""
    producer = Producer("bench-latency", namesrv).start()
    consumer = PullConsumer("bench-latency", namesrv).start()
    mq = consumer.fetch_queues(topic)[0]
    start_offset = consumer.max_offset(mq)
    total = int(rate * (seconds + warmup))
    skip = int(rate * warmup)
    samples: list[int] = []
    done = threading.Event()

    proc: subprocess.Popen[str] | None = None
    t = threading.Thread(target=collect, args=(consumer, mq, start_offset, total, skip, samples, done.is_set))
    if consumer_in == "process":
        consumer.shutdown()
        proc = subprocess.Popen([sys.executable, "-m", "bench.consumer_proc", namesrv, topic, str(start_offset),
                                 str(total), str(skip)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "READY":
            raise RuntimeError("the consumer process did not start")
    else:
        t.start()
    time.sleep(0.3)
    pad = body[16:]

    async def pace() -> float:
        """Open loop: each send starts at its due time without waiting for earlier replies (a closed loop of
        synchronous sends cannot offer more than one message per round trip). Sends due within the loop's
        timer resolution (1 ms) go out together; a send created behind schedule starts at once (one loop pass)
        rather than after all the later ones that are also due."""
        inflight: set[asyncio.Task[SendResult]] = set()
        t0 = time.perf_counter_ns()
        for i in range(total):
            ahead = (t0 + int(i * 1e9 / rate) - time.perf_counter_ns()) / 1e9
            if ahead > 0.001:
                await asyncio.sleep(ahead)
            task = asyncio.ensure_future(producer.asend(Message(topic, struct.pack(">qq", i, time.perf_counter_ns())
                                                                + pad)))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
            if ahead <= 0:  # behind schedule: let this send start now instead of after every later one is due
                await asyncio.sleep(0)
            if len(inflight) >= 4096:
                await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
        elapsed = (time.perf_counter_ns() - t0) / 1e9
        await asyncio.gather(*inflight)
        return total / elapsed

    sent_per_s = run_sync(pace())
    if proc is not None:
        out, _ = proc.communicate(timeout=180)
        lines = out.split()
        if not lines or lines[-1] != "DONE":
            raise RuntimeError(f"the consumer process ended without its samples (exit {proc.returncode})")
        samples = [int(x) for x in lines[:-1]]
    else:
        t.join(30)
        done.set()
        consumer.shutdown()
    producer.shutdown()
    return {**quantiles_ms(samples), "count": float(len(samples)), "sent_per_s": sent_per_s}


def ours_long_poll_wake(namesrv: str, topic: str, rounds: int = 50) -> Figures:
    """How soon a pull already held by the broker (empty queue) gets a message after it is sent."""
    producer = Producer("bench-wake", namesrv).start()
    consumer = PullConsumer("bench-wake", namesrv).start()
    mq = consumer.fetch_queues(topic)[0]
    offset = consumer.max_offset(mq)
    samples: list[int] = []
    for i in range(rounds):
        box: dict[str, int] = {}

        def wait(offset: int = offset, box: dict[str, int] = box) -> None:
            res = consumer.pull_block_if_not_found(mq, offset, 1, timeout=10.0)
            box["at"] = time.perf_counter_ns()
            box["n"] = len(res.messages)

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.05)  # the pull is held by now
        sent = time.perf_counter_ns()
        producer.send(Message(topic, b"wake %d" % i), queue=mq)
        t.join(15)
        if box.get("n"):
            samples.append(box["at"] - sent)
        offset += 1
    producer.shutdown()
    consumer.shutdown()
    return {**quantiles_ms(samples), "count": float(len(samples))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.broker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", "-n", type=int, default=50_000, help="messages per throughput row (50000)")
    parser.add_argument("--body-size", type=int, default=1024, help="body bytes (1024)")
    parser.add_argument("--batch", type=int, default=64, help="batch size for batched/pipelined produce (64)")
    parser.add_argument("--rate", type=float, action="append",
                        help="latency rows: msg/s, repeatable (default: 5000 and 20000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="latency rows: measured seconds (5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="latency rows: dropped seconds (1)")
    parser.add_argument("--no-peers", action="store_true", help="measure only our broker")
    parser.add_argument("--serialize", choices=("ROCKETMQ", "JSON", "both"), default="ROCKETMQ",
                        help="command header serialization our SDK sends (RocketMQ remoting: binary ROCKETMQ or "
                             "JSON; the broker answers in kind). 'both' measures our rows once per type; ratios "
                             "use ROCKETMQ (default ROCKETMQ)")
    parser.add_argument("--skip-latency", action="store_true", help="skip the paced latency rows")
    parser.add_argument("--consumer", choices=("process", "thread"), default="process",
                        help="where the latency rows' consumer runs: a process of its own, as a consumer service "
                             "would (default), or a thread of the producer's process, sharing its GIL")
    parser.add_argument("--paired-rounds", type=int, default=6,
                        help="sync send against Redis in this many alternating rounds of 5,000 (bench/paired.py); "
                             "the sync-send target is stated with their medians. 0 skips them (6)")
    args = parser.parse_args(argv)
    rates = args.rate or [5000.0, 20000.0]
    body = os.urandom(args.body_size)
    rows: dict[str, Figures] = {}
    print(f"# bench.broker: {args.messages:,} messages of {args.body_size} B, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")
    print(format_header())

    def report(name: str, figures: Figures) -> None:
        rows[name] = figures
        print(format_row(name, figures), flush=True)

    for stype in (("ROCKETMQ", "JSON") if args.serialize == "both" else (args.serialize,)):
        os.environ["BROKER_CORE_SERIALIZE_TYPE"] = stype  # read by every client built from here on
        suffix = "[json]" if args.serialize == "both" and stype == "JSON" else ""
        broker = OurBroker()
        try:
            admin = AdminClient(broker.namesrv).start()
            report("ours_produce_batched" + suffix, ours_produce_batched(
                broker.namesrv, _topic(admin, "BenchBatch"), args.messages, body, args.batch))
            report("ours_produce_sync" + suffix, ours_produce_sync(
                broker.namesrv, _topic(admin, "BenchSync"), min(args.messages, 20_000), body))
            report("ours_consume" + suffix, ours_consume(broker.namesrv, _topic(admin, "BenchConsume"),
                                                         args.messages, body))
            report("ours_long_poll_wake" + suffix, ours_long_poll_wake(broker.namesrv, _topic(admin, "BenchWake")))
            if not args.skip_latency:
                for rate in rates:
                    report(f"ours_latency_{int(rate)}" + suffix, ours_latency(
                        broker.namesrv, _topic(admin, f"BenchLatency{int(rate)}"), rate, args.seconds, body,
                        args.warmup, args.consumer))
                if not suffix:  # this machine's floor at the first rate (bench/floor.py): not ours, a reference
                    report(f"floor_rtt_{int(rates[0])}", floor_latency(rates[0], args.seconds, body, args.warmup))
            admin.shutdown()
        finally:
            broker.close()
    if not args.no_peers:
        from bench.servers import NatsServer, RedisServer

        with RedisServer() as redis_server, NatsServer() as nats_server:
            run_peers(redis_server.url, nats_server.url, args.messages, body, batch=args.batch, rate=rates[0],
                      seconds=args.seconds, warmup=args.warmup, report=report)
        print()
        targets = [  # the speed issue's targets: ratios in one run, side by side
            ("batched produce vs Redis pipelined XADD", "ours_produce_batched", "redis_produce_pipelined", 2.0),
            ("sync send vs Redis one-at-a-time XADD", "ours_produce_sync", "redis_produce_sync", 1.0),
            ("consume vs Redis XREAD", "ours_consume", "redis_consume", 1.0),
            ("consume vs NATS JetStream pull", "ours_consume", "nats_consume_pull", 1.0),
        ]
        paired = paired_sync(args.paired_rounds, 5000, body) if args.paired_rounds > 0 else None
        for label, ours, peer, target in targets:
            ratio = rows[ours]["msg_per_s"] / rows[peer]["msg_per_s"]
            if paired is not None and ours == "ours_produce_sync":
                print(f"{label:42} ratio {ratio:6.2f}  (the two rows above, a minute apart: not the target's figure)")
                print(f"  {describe(paired, args.paired_rounds, 5000)}")
                label, ratio = "sync send vs Redis, medians of the rounds", paired["ratio"]
            print(f"{label:42} ratio {ratio:6.2f}  target >= {target}: {'MET' if ratio >= target else 'MISSED'}")
    wake = rows["ours_long_poll_wake"]
    print(f"{'held pull woken by a send (long polling)':42} p50 {wake['p50_ms']:.2f} ms  p99 {wake['p99_ms']:.2f} ms"
          f"  target < 100 ms: {'MET' if wake['p99_ms'] < 100 else 'MISSED'}")
    if args.skip_latency:
        return 0
    for rate in rates:  # the producer must really reach the rate; p99 under 2 ms at 5k/s, 5 ms at 20k/s
        lat = rows[f"ours_latency_{int(rate)}"]
        limit = 2.0 if rate <= 5000 else 5.0
        reached = lat["sent_per_s"] >= 0.95 * rate
        print(f"{'end-to-end latency at ' + str(int(rate)) + ' msg/s':42} sent {lat['sent_per_s']:,.0f}/s  "
              f"p50 {lat['p50_ms']:.2f} ms  p99 {lat['p99_ms']:.2f} ms  p99.9 {lat['p999_ms']:.2f} ms  "
              f"target rate reached and p99 < {limit:g} ms: {'MET' if reached and lat['p99_ms'] < limit else 'MISSED'}")
    floor = rows.get(f"floor_rtt_{int(rates[0])}")
    if floor:
        print(f"{'floor: echo server RTT at ' + str(int(rates[0])) + ' msg/s':42} p50 {floor['p50_ms']:.2f} ms  "
              f"p99 {floor['p99_ms']:.2f} ms  p99.9 {floor['p999_ms']:.2f} ms  (a minimal Python client and server: "
              "what this machine adds, not a target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
