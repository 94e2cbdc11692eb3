"""HA benchmark: produce throughput of a standalone master, an ASYNC_MASTER with a slave and a SYNC_MASTER with a
slave, in the same run on the same machine (each a fresh name server and broker processes), as ratios to the
standalone master; and the replication lag at steady state (ASYNC_MASTER: the slave's bytes behind, sampled from
the master's runtime info while producing). ``python -m bench.ha --help``.

Workloads per setup: ``sync`` (``Producer.send`` one at a time, each waits for its answer: what SYNC_MASTER
costs a caller) and ``batch`` (``Producer.send_batch`` of ``--batch`` messages). 128-byte bodies, ASYNC_FLUSH.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from broker_core.client import AdminClient, Message, Producer
from tests.integration.cluster import BrokerProcess, Cluster, wait_until

TOPIC = "BenchHa"
BODY = b"x" * 128


def _broker(tmp: Path, namesrv: str, tag: str, conf: str) -> BrokerProcess:
    (tmp / tag).mkdir(parents=True)
    return BrokerProcess("bench-ha", tmp / tag / "store", namesrv, tmp / f"{tag}.log",
                         "haListenPort=0\nmapedFileSizeCommitLog=134217728\n" + conf)


def run_setup(name: str, role: str, with_slave: bool, seconds: float, batch: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-ha-{name}-"))
    cluster = Cluster(tmp)
    procs: list[BrokerProcess] = []
    try:
        m = _broker(tmp, cluster.namesrv, "master", f"brokerRole={role}\n").start()
        procs.append(m)
        with AdminClient(cluster.namesrv) as admin:
            if with_slave:
                procs.append(_broker(tmp, cluster.namesrv, "slave", "brokerRole=SLAVE\nbrokerId=1\n").start())
                wait_until(lambda: str(admin.broker_runtime(m.addr).get("haConnections")) == "1", 60, "slave")
            admin.create_topic(TOPIC, 4, 4)
            with Producer(f"bench-{role}-{int(with_slave)}", cluster.namesrv) as producer:
                producer.send(Message(TOPIC, BODY))  # route and connections warm
                out: dict[str, float] = {}
                n, end = 0, time.perf_counter() + seconds
                start = time.perf_counter()
                while time.perf_counter() < end:
                    producer.send(Message(TOPIC, BODY))
                    n += 1
                out["sync msg/s"] = n / (time.perf_counter() - start)
                lags: list[int] = []
                stop = threading.Event()

                def sample() -> None:
                    while not stop.wait(0.2):
                        slaves = json.loads(str(admin.broker_runtime(m.addr).get("haSlaves") or "[]"))
                        if slaves:
                            lags.append(int(slaves[0]["lagBytes"]))

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                msgs = [Message(TOPIC, BODY) for _ in range(batch)]
                n, end = 0, time.perf_counter() + seconds
                start = time.perf_counter()
                while time.perf_counter() < end:
                    producer.send_batch(msgs)
                    n += batch
                out["batch msg/s"] = n / (time.perf_counter() - start)
                stop.set()
                sampler.join()
                if lags:
                    out["lag bytes (median)"] = statistics.median(lags)
                    out["lag bytes (max)"] = max(lags)
                return out
    finally:
        for p in procs:
            p.stop()
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ha", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per workload and setup (default 5)")
    parser.add_argument("--batch", type=int, default=64, help="messages per batch send (default 64)")
    args = parser.parse_args()
    setups = [("standalone", "ASYNC_MASTER", False), ("async+slave", "ASYNC_MASTER", True),
              ("sync+slave", "SYNC_MASTER", True)]
    results = {name: run_setup(name, role, slave, args.seconds, args.batch) for name, role, slave in setups}
    base = results["standalone"]
    print(f"{'setup':14} {'sync msg/s':>11} {'ratio':>6} {'batch msg/s':>12} {'ratio':>6}  replication lag")
    for name, r in results.items():
        lag = (f"median {r['lag bytes (median)']:.0f} B, max {r['lag bytes (max)']:.0f} B"
               if "lag bytes (median)" in r else "-")
        print(f"{name:14} {r['sync msg/s']:11.0f} {r['sync msg/s'] / base['sync msg/s']:6.2f} "
              f"{r['batch msg/s']:12.0f} {r['batch msg/s'] / base['batch msg/s']:6.2f}  {lag}")


if __name__ == "__main__":
    main()
