"""RocketMQ 5 gRPC benchmark: the official Python client (``rocketmq-python-client`` 5.1.2, in its own process
through ``tests/compat/grpc_client.py``) against our broker's gRPC endpoint, beside our SDK against the same
broker's remoting port, same run, same broker, 1 KiB bodies (``python -m bench.grpc --help``).

Rows: ``official_send_sync`` (``Producer.send`` one at a time), ``official_send_async`` (``send_async`` all,
then wait), ``official_receive_ack`` (SimpleConsumer ``receive(32)`` + ``ack`` each), ``ours_produce_sync``
(``Producer.send``), ``ours_consume`` (``PullConsumer.pull`` 1024 at a time). Client start-up is not timed.
Reference (rocketmq-grpc-and-perf.md, measured on a machine like ours): the official producer did about 0.9 k
sync and 1.7 k async msg/s against a minimal in-memory grpc.aio server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_core.client import AdminClient, Message, Producer, PullConsumer

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
DRIVER = ROOT / "tests" / "compat" / "grpc_client.py"


def ours_produce_sync(namesrv: str, topic: str, n: int, body: bytes) -> float:
    """Our SDK's ``Producer.send`` one at a time over the remoting port (as bench.broker's row)."""
    producer = Producer("bench-sync", namesrv).start()
    producer.send(Message(topic, body))  # route and connection, not timed
    t0 = time.perf_counter()
    for _ in range(n):
        producer.send(Message(topic, body))
    dt = time.perf_counter() - t0
    producer.shutdown()
    return n / dt


def ours_consume(namesrv: str, topic: str, n: int) -> float:
    """Our SDK's ``PullConsumer.pull`` 1024 at a time from the queue's start (as bench.broker's row)."""
    consumer = PullConsumer("bench-consume", namesrv).start()
    mq = consumer.fetch_queues(topic)[0]
    offset, got = consumer.min_offset(mq), 0
    t0 = time.perf_counter()
    while got < n:
        res = consumer.pull(mq, offset, 1024)
        got += len(res.messages)
        offset = res.next_begin_offset
    dt = time.perf_counter() - t0
    consumer.shutdown()
    return n / dt


class GrpcBroker:
    """A name server and one broker serving gRPC too, as subprocesses in a temp dir."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-grpc-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.namesrv = f"127.0.0.1:{self._start(['-m', 'broker_core.namesrv', '--listen', '127.0.0.1:0'])['port']}"
        ports = self._start(["-m", "broker_core", "--store-dir", str(self.tmp / "store"), "--listen", "127.0.0.1:0",
                             "--grpc-listen", "127.0.0.1:0", "--namesrv", self.namesrv, "--log-level", "WARNING"])
        self.grpc = f"127.0.0.1:{ports['grpc_port']}"

    def _start(self, args: list[str]) -> dict[str, int]:
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("READY port="):
            raise RuntimeError(f"{args} did not start: {line!r}")
        return {k: int(v) for k, v in (f.split("=", 1) for f in line.split()[1:])}

    def official(self, cmd: dict[str, Any]) -> dict[str, Any]:
        home = self.tmp / "home"
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HOME": str(home)}
        proc = subprocess.run([sys.executable, str(DRIVER)], input=json.dumps({**cmd, "endpoint": self.grpc}).encode(),
                              capture_output=True, env=env, timeout=1800, check=False)
        if proc.returncode:
            raise RuntimeError(proc.stderr.decode()[-3000:])
        return dict(json.loads(proc.stdout.decode().strip().splitlines()[-1]))

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grpc", description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="messages per row (default 2000)")
    parser.add_argument("--body-bytes", type=int, default=1024)
    args = parser.parse_args(argv)
    n, text = args.n, "x" * args.body_bytes
    broker = GrpcBroker()
    rows: dict[str, float] = {}
    try:
        with AdminClient(broker.namesrv) as admin:
            for topic in ("BenchGrpcSync", "BenchGrpcAsync", "BenchOurs"):
                admin.create_topic(topic, 1, 1)
        msgs = [{"topic": "BenchGrpcSync", "body": text}] * n
        rows["official_send_sync"] = n / broker.official({"op": "produce", "mode": "sync", "messages": msgs})["seconds"]
        msgs = [{"topic": "BenchGrpcAsync", "body": text}] * n
        rows["official_send_async"] = n / broker.official({"op": "produce", "mode": "async",
                                                           "messages": msgs})["seconds"]
        got = broker.official({"op": "receive", "group": "bench-grpc", "topic": "BenchGrpcAsync", "expect": n,
                               "count_only": True, "within": 600})
        rows["official_receive_ack"] = got["count"] / got["seconds"]
        rows["ours_produce_sync"] = ours_produce_sync(broker.namesrv, "BenchOurs", n, text.encode())
        rows["ours_consume"] = ours_consume(broker.namesrv, "BenchOurs", n)
    finally:
        broker.close()
    print(f"{'row':24} {'msg/s':>10}   ({n} messages of {args.body_bytes} B, one broker, same run)")
    for name, value in rows.items():
        print(f"{name:24} {value:10.0f}")
    print(f"ratio ours_produce_sync / official_send_sync: {rows['ours_produce_sync'] / rows['official_send_sync']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
