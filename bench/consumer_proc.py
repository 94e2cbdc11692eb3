"""The latency rows' consumer in a process of its own (``bench.broker --consumer process``): pulls ``total``
messages of one queue from ``offset`` with long polling and prints, for each message whose sequence number is at
least ``skip``, receive time minus the send time in its body, in nanoseconds, one per line, then ``DONE``.
``time.perf_counter_ns`` reads CLOCK_MONOTONIC on Linux: one clock for every process of the machine."""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Callable

from broker_core.client import MessageQueue, PullConsumer


def collect(consumer: PullConsumer, mq: MessageQueue, offset: int, total: int, skip: int, samples: list[int],
            stop: Callable[[], bool]) -> None:
    """Pull ``total`` messages from ``offset`` (until ``stop()``), appending receive - send of each message numbered
    ``skip`` or later to ``samples``. Also the latency rows' consumer thread (``--consumer thread``)."""
    seen = 0
    while seen < total and not stop():
        res = consumer.pull_block_if_not_found(mq, offset, 256, timeout=2.0)
        now = time.perf_counter_ns()
        for m in res.messages:
            seq, sent = struct.unpack_from(">qq", m.body)
            if seq >= skip:
                samples.append(now - sent)
        seen += len(res.messages)
        offset = res.next_begin_offset


def main(argv: list[str]) -> int:
    namesrv, topic, offset_s, total_s, skip_s = argv
    consumer = PullConsumer("bench-latency-proc", namesrv).start()
    mq = consumer.fetch_queues(topic)[0]
    samples: list[int] = []
    print("READY", flush=True)
    deadline = time.monotonic() + 120
    collect(consumer, mq, int(offset_s), int(total_s), int(skip_s), samples, lambda: time.monotonic() > deadline)
    consumer.shutdown()
    sys.stdout.write("".join(f"{s}\n" for s in samples) + "DONE\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
