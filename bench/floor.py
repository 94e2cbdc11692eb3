"""The machine's latency floor for the paced rows of ``bench.broker``: a minimal open-loop client and an echo
server, both Python on uvloop, exchanging the same frames as a send (SEND_MESSAGE_V2 with a 1 KiB body, answered
by a send response), with no store, no SDK and no consumer. Its tail is what this machine and interpreter add
before any broker work (scheduling stalls, the event loop, the kernel's loopback): not a target, a reference.

``python -m bench.floor [--rate 5000] [--seconds 5]`` prints one row; ``--serve`` runs the echo server alone (it
prints ``READY port=N``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.peers import Figures, format_header, format_row, quantiles_ms
from broker_core.codec.wire import FLAG_RESPONSE, SERIALIZE_ROCKETMQ, encode_binary_frame
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode
from broker_core.remoting import loops

ROOT = Path(__file__).resolve().parent.parent
_ANSWER = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "0",
           "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.decoder = FrameDecoder()

    def data_received(self, data: bytes) -> None:
        self.transport.writelines([  # type: ignore[attr-defined]  # a stream transport
            encode_binary_frame(0, 9, 1, cmd.opaque, FLAG_RESPONSE, None, _ANSWER) for cmd in self.decoder.feed(data)])


async def _serve() -> None:
    server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", 0)
    print(f"READY port={server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


def floor_latency(rate: float, seconds: float, body: bytes, warmup: float = 1.0) -> Figures:
    """Send -> response latency of frames written at ``rate`` (open loop) to the echo server (a subprocess)."""
    server = subprocess.Popen([sys.executable, "-m", "bench.floor", "--serve"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().decode().strip().split("=")[1])
        header = {"a": "floor", "b": "Floor", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0",
                  "i": "", "j": "0", "k": "false", "m": "false"}
        total, skip = int(rate * (seconds + warmup)), int(rate * warmup)
        sent: dict[int, int] = {}
        samples: list[int] = []

        class Client(asyncio.Protocol):
            def __init__(self) -> None:
                self.decoder = FrameDecoder()

            def data_received(self, data: bytes) -> None:
                now = time.perf_counter_ns()
                for cmd in self.decoder.feed(data):
                    at = sent.pop(cmd.opaque)
                    if cmd.opaque >= skip:
                        samples.append(now - at)

        async def pace() -> float:
            transport, _ = await asyncio.get_running_loop().create_connection(Client, "127.0.0.1", port)
            t0 = time.perf_counter_ns()
            for i in range(total):
                ahead = (t0 + int(i * 1e9 / rate) - time.perf_counter_ns()) / 1e9
                if ahead > 0.001:
                    await asyncio.sleep(ahead)
                cmd = RemotingCommand(int(RequestCode.SEND_MESSAGE_V2), i, 0, dict(header), body,
                                      serialize_type=SERIALIZE_ROCKETMQ)
                sent[i] = time.perf_counter_ns()
                transport.write(cmd.encode())
            elapsed = (time.perf_counter_ns() - t0) / 1e9
            deadline = time.monotonic() + 10
            while sent and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            transport.close()
            return total / elapsed

        sent_per_s = loops.run(pace())
        return {**quantiles_ms(samples), "count": float(len(samples)), "sent_per_s": sent_per_s}
    finally:
        server.kill()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="run the echo server only")
    parser.add_argument("--rate", type=float, default=5000.0, help="frames a second (5000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds (5)")
    args = parser.parse_args(argv)
    if args.serve:
        loops.run(_serve())
        return 0
    print(format_header())
    print(format_row(f"floor_rtt_{int(args.rate)}", floor_latency(args.rate, args.seconds, os.urandom(1024))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
