"""Sync send, ours against Redis, in alternating rounds (``python -m bench.paired --help``).

One at a time sends are a round trip each, so their rate follows whatever else this machine does at that moment
(a 2-vCPU VM: another tenant, the page cache writer, a timer): two rows measured a minute apart can differ by 20%
on their own. Here both servers stay up and the rounds alternate, ours then Redis, ``--rounds`` times with
``--per-round`` sends each; the ratio of the two medians is the figure ``bench.broker`` states the sync-send
target with. Same clients as the single rows: ``Producer.send`` (SEND_MESSAGE_V2, 1 KiB body, ASYNC_FLUSH) and
redis-py ``XADD`` (AOF everysec).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import redis

from bench.peers import Figures
from bench.servers import RedisServer
from broker_core.client import AdminClient, Message, Producer


def paired_sync(rounds: int, per_round: int, body: bytes) -> Figures:
    """Medians of ``rounds`` alternating rounds: ``ours_msg_per_s``, ``redis_msg_per_s`` and their ``ratio``."""
    from bench.broker import OurBroker  # bench.broker imports this module

    ours: list[float] = []
    theirs: list[float] = []
    broker = OurBroker()
    try:
        with RedisServer() as server:
            admin = AdminClient(broker.namesrv).start()
            admin.create_topic("BenchPaired", 1, 1)
            producer = Producer("bench-paired", broker.namesrv).start()
            client = redis.Redis.from_url(server.url)
            try:
                for _ in range(200):  # connections, routes, first segment pages: not timed
                    producer.send(Message("BenchPaired", body))
                    client.xadd("bench-paired", {b"b": body})
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    for _ in range(per_round):
                        producer.send(Message("BenchPaired", body))
                    ours.append(per_round / (time.perf_counter() - t0))
                    t0 = time.perf_counter()
                    for _ in range(per_round):
                        client.xadd("bench-paired", {b"b": body})
                    theirs.append(per_round / (time.perf_counter() - t0))
                if client.xlen("bench-paired") != 200 + rounds * per_round:
                    raise RuntimeError("Redis does not hold every entry the rounds added")
            finally:
                client.close()
                producer.shutdown()
                admin.shutdown()
    finally:
        broker.close()
    mine, peer = statistics.median(ours), statistics.median(theirs)
    return {"ours_msg_per_s": mine, "redis_msg_per_s": peer, "ratio": mine / peer,
            "ours_min": min(ours), "ours_max": max(ours), "redis_min": min(theirs), "redis_max": max(theirs)}


def describe(f: Figures, rounds: int, per_round: int) -> str:
    return (f"sync send, {rounds} alternating rounds of {per_round:,}: ours median {f['ours_msg_per_s']:,.0f}/s "
            f"({f['ours_min']:,.0f}-{f['ours_max']:,.0f}), Redis median {f['redis_msg_per_s']:,.0f}/s "
            f"({f['redis_min']:,.0f}-{f['redis_max']:,.0f})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.paired", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=8, help="alternating rounds (8)")
    p.add_argument("--per-round", type=int, default=5000, help="sends per round and side (5000)")
    p.add_argument("--body-size", type=int, default=1024, help="body bytes (1024)")
    args = p.parse_args(argv)
    f = paired_sync(args.rounds, args.per_round, os.urandom(args.body_size))
    print(describe(f, args.rounds, args.per_round))
    print(f"ratio of the medians {f['ratio']:.2f}  target >= 1.0: {'MET' if f['ratio'] >= 1.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
