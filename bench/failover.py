"""Failover benchmark (issue 34): the write-unavailability window of a controller-mode broker group when its master
dies, per round, at the default settings. ``python -m bench.failover --help``.

Setup (loopback, real processes): ``--controllers`` controllers (pysyncobj Raft), a name server and a group of
three brokers with ``enableControllerMode=true`` and ``allAckInSyncStateSet=true``; every other key at its
default (brokerHeartbeatInterval 1 s, controllerHeartBeatTimeoutMills 10 s, ...). Two SDK producers send one
message at a time (sync) and log every SEND_OK with the broker that stored it (from the offset message id).
By default they also re-read the route themselves after a failed send; ``--plain`` leaves that to the SDK (its
defaults: it re-reads the route after a refused connection, a timeout, 14 or SYSTEM_ERROR).

Each round: wait until the SyncStateSet holds the three brokers; SIGKILL (``--fault kill``) or SIGSTOP
(``--fault stop``) the master at t0; the window is t0 -> the first acknowledged send stored by another broker
(the new master); then the old master is restarted (or continued) and rejoins as a slave. Reported: the window
per round and its p50 / p99 / max, and the messages acknowledged per round.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path

from tests.integration.cluster import wait_until
from tests.integration.failover_cluster import FailoverGroup, LoggingProducer


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def first_on_another(producers: list[LoggingProducer], t0: float, old_addr: str) -> float | None:
    """When the first send after ``t0`` was acknowledged by a broker other than ``old_addr``."""
    times = [a.at for p in producers for a in p.acks if a.at > t0 and a.store and a.store != old_addr]
    return min(times) if times else None


def one_round(group: FailoverGroup, producers: list[LoggingProducer], fault: str, r: int) -> dict[str, float]:
    group.wait_in_sync(3, timeout=120)
    old = group.wait_master()
    addr = old.addr
    wait_until(lambda: any(a.store == addr for p in producers for a in p.acks[-5:]), 60, "acks on the master")
    assert old.proc is not None
    t0 = time.monotonic()
    if fault == "kill":
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait()
    else:
        old.proc.send_signal(signal.SIGSTOP)
    wait_until(lambda: first_on_another(producers, t0, addr) is not None, 120,
               "an acknowledged send on the new master")
    window = (first_on_another(producers, t0, addr) or t0) - t0
    if fault == "kill":
        old.start(old.port)
    else:
        old.proc.send_signal(signal.SIGCONT)
    group.wait_in_sync(3, timeout=120)
    acked = sum(1 for p in producers for a in p.acks if a.at > t0)
    return {"round": r, "window_s": round(window, 3), "acked_in_round": acked}


def run(rounds: int, controllers: int, fault: str, keep: bool, plain: bool = False) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    group = FailoverGroup(tmp, controllers=controllers, brokers=3)
    producers: list[LoggingProducer] = []
    records: list[dict[str, float]] = []
    try:
        group.start()
        producers = [LoggingProducer(group.namesrv, f"bench{i}", plain=plain) for i in range(2)]
        for p in producers:
            p.start()
        for r in range(rounds):
            records.append(one_round(group, producers, fault, r))
            print(json.dumps(records[-1]), flush=True)
    finally:
        for p in producers:
            p.stop()
        group.close()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    windows = [r["window_s"] for r in records]
    per_round = [int(r["acked_in_round"]) for r in records]
    return {"fault": fault, "controllers": controllers, "plain": plain, "rounds": len(records),
            "window_s": {"p50": round(statistics.median(windows), 3), "p99": round(percentile(windows, 99), 3),
                         "max": round(max(windows), 3)},
            "acked_per_round": {"median": statistics.median(per_round), "min": min(per_round),
                                "max": max(per_round)}}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--controllers", type=int, default=3, help="controllers in the Raft group (default 3)")
    parser.add_argument("--fault", choices=["kill", "stop"], default="kill",
                        help="SIGKILL the master (default), or SIGSTOP it (a hung host: detected by heartbeat timeout)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    parser.add_argument("--plain", action="store_true",
                        help="producers with the SDK's defaults only (no route re-read of their own after a failure)")
    args = parser.parse_args()
    print(json.dumps(run(args.rounds, args.controllers, args.fault, args.keep, args.plain)))


if __name__ == "__main__":
    main()
