"""``python -m broker_core.controller --config controller.conf``: run one controller (RocketMQ's
``mqcontroller -c``).

Prints exactly one line, ``READY port=<port>``, to stdout once listening on this node's
``controllerDLegerPeers`` address (`` metrics_port=<port>`` after it with ``metricsExporterType=PROM``,
``metricsPromExporterHost`` and ``metricsPromExporterPort`` in the file: Prometheus /metrics); logs go to stderr.
SIGTERM or SIGINT stops it (exit 0). A bad config exits
with code 2 naming the key; a port that cannot be bound exits with code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from broker_core.codec.properties_file import parse_properties
from broker_core.controller.config import RAFT_PORT_OFFSET, ControllerConfig
from broker_core.controller.metrics import ControllerMetrics
from broker_core.controller.server import ControllerServer
from broker_core.remoting import loops

EXAMPLE = f"""\
example controller.conf (one per node; only controllerDLegerSelfId differs):
  controllerDLegerGroup = group1
  controllerDLegerPeers = n0-127.0.0.1:9877;n1-127.0.0.1:9868;n2-127.0.0.1:9869
  controllerDLegerSelfId = n0
  controllerStorePath = /var/lib/rocketmq/controller-n0
  enableElectUncleanMaster = false
  notifyBrokerRoleChanged = true

Brokers (enableControllerMode=true) and admin tools use the peer addresses (controllerAddr=...).
The Raft traffic (pysyncobj) uses a second port per node: controllerRaftPeers, in the same form, or by default
each peer's port + {RAFT_PORT_OFFSET}.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m broker_core.controller", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a RocketMQ 5 controller: it keeps, per broker-set, the master, its epoch and the "
                    "SyncStateSet, replicated over Raft among the controllerDLegerPeers, and elects a new "
                    "master when one dies. Prints 'READY port=<port>' once listening.",
        epilog=EXAMPLE)
    parser.add_argument("--config", "-c", required=True, metavar="FILE",
                        help="controller properties file (RocketMQ's controller keys, see below)")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="listen here instead of this node's controllerDLegerPeers address (port 0 picks a "
                             "free port; other controllers and brokers still use the peers list)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        type=str.upper, metavar="LEVEL", help="stderr log level (default INFO)")
    return parser


async def serve(config: ControllerConfig, listen: tuple[str, int] | None,
                metrics_at: tuple[str, int] | None = None) -> int:
    server = ControllerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        bound = await server.start(*(listen or (None, None)))
    except OSError as exc:
        print(f"error: cannot listen: {exc}", file=sys.stderr)
        await server.close()
        return 1
    metrics: ControllerMetrics | None = None
    ready = f"READY port={bound}"
    if metrics_at is not None:  # Prometheus /metrics (controller/metrics.py)
        metrics = ControllerMetrics(server.manager)
        ready += f" metrics_port={metrics.start(*metrics_at)}"
    print(ready, flush=True)
    try:
        await stop.wait()
        logging.getLogger("broker_core.controller").info("shutting down")
    finally:
        if metrics is not None:
            metrics.close()
        await server.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        with open(args.config, encoding="utf-8") as f:
            props = parse_properties(f.read(), source=args.config)
        config = ControllerConfig.from_properties(props)
        config.validate()
    except (OSError, ValueError) as exc:
        parser.error(f"{args.config}: {exc}")
    listen = None
    if args.listen:
        host, sep, port = args.listen.rpartition(":")
        if not sep or not port.isdigit():
            parser.error(f"--listen: expected HOST:PORT, got {args.listen!r}")
        listen = (host.strip("[]"), int(port))
    metrics_at = None
    if props.get("metricsExporterType", "").strip().upper() == "PROM":
        metrics_at = (props.get("metricsPromExporterHost", "").strip() or "127.0.0.1",
                      int(props.get("metricsPromExporterPort", "5557").strip() or 5557))
    return loops.run(serve(config, listen, metrics_at))


if __name__ == "__main__":
    raise SystemExit(main())
