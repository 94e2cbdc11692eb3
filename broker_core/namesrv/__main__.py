"""``python -m broker_core.namesrv``: run a name server.

Prints exactly one line, ``READY port=<port>`` (`` metrics_port=<port>`` after it with ``--metrics-port``), to
stdout once listening (port 0 picks a free port); logs go
to stderr. SIGTERM or SIGINT closes the listener and connections and exits with code 0. Bad arguments
exit with code 2; a port that cannot be bound exits with code 1.

``--config FILE`` takes RocketMQ's namesrv properties (``listenPort``, ``bindAddress``, ``kvConfigPath``,
``orderMessageEnable``, ``scanNotActiveBrokerInterval``, ``enableControllerInNamesrv`` with the controller keys
in the same file); a command-line flag given as well wins over the file.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from broker_core.codec.properties_file import parse_properties
from broker_core.controller.config import ControllerConfig
from broker_core.namesrv.metrics import NamesrvMetrics
from broker_core.namesrv.registration_auth import ENV_CLUSTER_SECRET
from broker_core.namesrv.route_info import BROKER_CHANNEL_EXPIRED_MS
from broker_core.namesrv.server import DEFAULT_LISTEN_PORT, DEFAULT_SCAN_INTERVAL_MS, NamesrvController
from broker_core.remoting import loops


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6addr]:PORT`` for IPv6) -> (host, port)."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m broker_core.namesrv",
        description="Run a broker_core name server: brokers register their topics here and send heartbeats; "
                    "producers and consumers fetch topic routes from it. Prints 'READY port=<port>' once "
                    "listening; SIGTERM or SIGINT shuts it down cleanly (exit code 0).",
    )
    parser.add_argument("--config", "-c", metavar="FILE",
                        help="RocketMQ namesrv properties: listenPort, bindAddress, kvConfigPath, "
                             "orderMessageEnable, scanNotActiveBrokerInterval; enableControllerInNamesrv=true runs "
                             "the RocketMQ 5 controller in this process, on this port, with the controller keys "
                             "of the same file (controllerDLegerGroup, controllerDLegerPeers, "
                             "controllerDLegerSelfId, controllerStorePath, enableElectUncleanMaster...; without "
                             "controllerDLegerPeers, a group of one). Flags given here win over the file")
    parser.add_argument("--listen", type=parse_listen, default=None,
                        metavar="HOST:PORT",
                        help=f"address to listen on; port 0 picks a free port, reported on the READY line "
                             f"(default 127.0.0.1:{DEFAULT_LISTEN_PORT})")
    parser.add_argument("--scan-interval-ms", type=positive_int, default=None, metavar="N",
                        help=f"how often to look for brokers without a recent heartbeat, in milliseconds "
                             f"(default {DEFAULT_SCAN_INTERVAL_MS}; the first scan runs after 5000 ms or one "
                             f"interval, whichever is shorter)")
    parser.add_argument("--broker-expire-ms", type=positive_int, default=BROKER_CHANNEL_EXPIRED_MS, metavar="N",
                        help=f"a broker with no heartbeat for longer than this many milliseconds is removed "
                             f"from all routes (default {BROKER_CHANNEL_EXPIRED_MS})")
    parser.add_argument("--kv-config-path", type=Path, default=None, metavar="FILE",
                        help="keep the KV config (PUT_KV_CONFIG ...) in this file, RocketMQ's kvConfig.json "
                             "(default: in memory only)")
    parser.add_argument("--order-message-enable", action="store_true", default=None,
                        help="add orderTopicConf from the ORDER_TOPIC_CONFIG namespace to routes "
                             "(RocketMQ's orderMessageEnable; off by default as upstream)")
    parser.add_argument("--cluster-secret", default=os.environ.get(ENV_CLUSTER_SECRET, ""), metavar="SECRET",
                        help=f"accept broker registrations only when signed with this secret (the brokers' "
                             f"clusterSecret; longer than 6 characters). Default: ${ENV_CLUSTER_SECRET}, else "
                             f"none (every registration accepted, as RocketMQ). Prefer the environment variable: "
                             f"a command line is visible to other local users")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                        help="serve Prometheus /metrics on this port (0: a free one, reported on the READY line as "
                             "metrics_port=N); the properties' metricsExporterType=PROM with metricsPromExporterPort "
                             "and metricsPromExporterHost do the same (default: off)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        type=str.upper, metavar="LEVEL",
                        help="log level for stderr: DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


def apply_config_file(args: argparse.Namespace) -> ControllerConfig | None:
    """Fill the flags not given from ``args.config`` (RocketMQ's keys); the embedded controller's config when
    the file says ``enableControllerInNamesrv=true``. ``ValueError`` names a bad key."""
    props: dict[str, str] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            props = parse_properties(f.read(), source=args.config)
    if args.listen is None:
        port = props.get("listenPort", str(DEFAULT_LISTEN_PORT)).strip()
        if not port.isdigit() or int(port) > 65535:
            raise ValueError(f"listenPort must be a port number, got {port!r}")
        args.listen = (props.get("bindAddress", "127.0.0.1").strip() or "127.0.0.1", int(port))
    if args.scan_interval_ms is None:
        raw = props.get("scanNotActiveBrokerInterval", str(DEFAULT_SCAN_INTERVAL_MS)).strip()
        if not raw.isdigit() or int(raw) <= 0:
            raise ValueError(f"scanNotActiveBrokerInterval must be a positive integer, got {raw!r}")
        args.scan_interval_ms = int(raw)
    if args.kv_config_path is None and props.get("kvConfigPath", "").strip():
        args.kv_config_path = Path(os.path.expanduser(props["kvConfigPath"].strip()))
    if args.order_message_enable is None:
        args.order_message_enable = props.get("orderMessageEnable", "false").strip().lower() == "true"
    if args.metrics_port is None and props.get("metricsExporterType", "").strip().upper() == "PROM":
        args.metrics_port = int(props.get("metricsPromExporterPort", "5557").strip())
        args.metrics_host = props.get("metricsPromExporterHost", "").strip()
    if props.get("enableControllerInNamesrv", "false").strip().lower() != "true":
        return None
    return ControllerConfig.from_properties(props)


async def serve(args: argparse.Namespace, controller_config: ControllerConfig | None = None) -> int:
    controller = NamesrvController(scan_interval_ms=args.scan_interval_ms, broker_expire_ms=args.broker_expire_ms,
                                   kv_config_path=args.kv_config_path,
                                   order_message_enable=args.order_message_enable,
                                   cluster_secret=args.cluster_secret, controller_config=controller_config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    host, port = args.listen
    try:
        bound = await controller.start(host, port)
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        await controller.close()
        return 1
    metrics: NamesrvMetrics | None = None
    ready = f"READY port={bound}"
    if args.metrics_port is not None:  # Prometheus /metrics (namesrv/metrics.py)
        metrics = NamesrvMetrics(controller, f"{host}:{bound}")
        ready += f" metrics_port={metrics.start(getattr(args, 'metrics_host', '') or host, args.metrics_port)}"
    print(ready, flush=True)
    try:
        await stop.wait()
        logging.getLogger("broker_core.namesrv").info("shutting down")
    finally:
        if metrics is not None:
            metrics.close()
        await controller.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cluster_secret and len(args.cluster_secret) < 7:
        parser.error("--cluster-secret must be longer than 6 characters")
    try:
        controller_config = apply_config_file(args)
        if controller_config is not None and controller_config.controller_dleger_peers.strip():
            controller_config.validate()
    except (OSError, ValueError) as exc:
        parser.error(f"{args.config}: {exc}")
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return loops.run(serve(args, controller_config))


if __name__ == "__main__":
    raise SystemExit(main())
