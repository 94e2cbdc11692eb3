"""Push consumer throughput: ``PushConsumer`` (concurrently, the SDK's defaults: pull batch 32, 20 consume
threads, one message per listener call) draining ``-n`` pre-filled 1 KiB messages of one queue from a real name
server and broker (subprocesses, as :mod:`bench.broker`). ``python -m bench.push --help``.

Timed from the listener's first message to its last (start-up and the first rebalance are not timed); prints
msg/s and the client process's CPU per message. The listener counts and returns CONSUME_SUCCESS. No peer row:
Redis and NATS have no push consumer with this contract; the pull row of :mod:`bench.broker` is the one with
targets.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from bench.broker import OurBroker, _topic
from broker_core.client import AdminClient, ConsumeStatus, Message, MessageExt, Producer, PushConsumer


def run(n: int, pull_batch: int, threads: int, body_size: int) -> tuple[float, float]:
    broker = OurBroker()
    try:
        admin = AdminClient(broker.namesrv).start()
        topic = _topic(admin, "BenchPush")
        body = os.urandom(body_size)
        producer = Producer("bench-push-fill", broker.namesrv).start()
        for i in range(0, n, 256):
            producer.send_batch([Message(topic, body) for _ in range(min(256, n - i))])
        producer.shutdown()
        got, first, done, lock = [0], [0.0], threading.Event(), threading.Lock()

        def listener(msgs: list[MessageExt], ctx: object = None) -> ConsumeStatus:
            with lock:
                if not got[0]:
                    first[0] = time.perf_counter()
                got[0] += len(msgs)
                if got[0] >= n:
                    done.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("bench-push", broker.namesrv, consume_from="FIRST", pull_batch_size=pull_batch,
                                consume_thread_max=threads)
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        cpu0 = time.process_time()
        consumer.start()
        if not done.wait(600):
            raise RuntimeError(f"only {got[0]} of {n} messages arrived")
        dt = time.perf_counter() - first[0]
        cpu = time.process_time() - cpu0
        consumer.shutdown()
        admin.shutdown()
        return n / dt, cpu / n * 1e6
    finally:
        broker.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", "-n", type=int, default=50_000, help="pre-filled messages (50000)")
    p.add_argument("--pull-batch", type=int, default=32, help="pull_batch_size (32, RocketMQ's default)")
    p.add_argument("--threads", type=int, default=20, help="consume_thread_max (20)")
    p.add_argument("--body-size", type=int, default=1024, help="body bytes (1024)")
    args = p.parse_args(argv)
    rate, cpu = run(args.messages, args.pull_batch, args.threads, args.body_size)
    print(f"# bench.push: {args.messages:,} messages of {args.body_size} B, pull batch {args.pull_batch}, "
          f"{args.threads} consume threads, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"push consume  {rate:12,.0f} msg/s  client CPU {cpu:.1f} us/msg (start-up included in the CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
