"""``python -m broker_core``: run a broker.

``python -m broker_core --store-dir DIR --listen HOST:PORT [--namesrv HOST:PORT[;HOST:PORT]] [--config broker.conf]``

Opens (and recovers) the store directory, serves the broker protocol on ``--listen`` (port 0 picks a free
port), registers with the name servers, and prints one line ``READY port=<port>`` once it accepts
connections (``READY port=<port> grpc_port=<port>`` when RocketMQ 5 gRPC is on: ``--grpc-listen HOST:PORT``
or ``grpcListenPort``; `` metrics_port=<port>`` follows with ``metricsExporterType=PROM``). SIGTERM or SIGINT
shut it down cleanly (unregister, flush, checkpoint, remove ``abort``), exit code 0. Exit code 1: the store cannot
be opened (e.g. another broker holds it); 2: bad options.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from broker_core.config import BrokerConfig, ConfigError
from broker_core.remoting import loops
from broker_core.store.errors import StoreError


def build_parser() -> argparse.ArgumentParser:
    keys = "\n".join(f"  {k:34} {ck.doc} (default {ck.default!r})"
                     for k, ck in BrokerConfig.keys().items() if ck.canonical)
    parser = argparse.ArgumentParser(
        prog="python -m broker_core",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a broker_core broker: a RocketMQ-style store served over TCP.",
        epilog="broker.conf keys (each also settable as BROKER_CORE_<KEY_IN_UPPER_SNAKE_CASE>, e.g.\n"
               "BROKER_CORE_DELETE_WHEN=04):\n" + keys,
    )
    parser.add_argument("--store-dir", required=True,
                        help="store directory; overrides every store path of the config (storePathRootDir, ...)")
    parser.add_argument("--listen", default="127.0.0.1:10911",
                        help="HOST:PORT to serve on; port 0 picks a free port (default 127.0.0.1:10911)")
    parser.add_argument("--grpc-listen", metavar="HOST:PORT",
                        help="also serve RocketMQ 5 gRPC (MessagingService) here; port 0 picks a free port "
                             "(overrides grpcListenPort); the ready line then reads READY port=N grpc_port=M")
    parser.add_argument("--namesrv", help="name servers HOST:PORT[;HOST:PORT] (overrides namesrvAddr)")
    parser.add_argument("--config", help="a RocketMQ-style broker.conf file")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


async def serve(config: BrokerConfig, host: str, port: int, grpc_host: str | None = None) -> int:
    from broker_core.server.controller import BrokerController

    controller = BrokerController(config)
    controller.grpc_host = grpc_host
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        bound = await controller.start(host, port)
    except (StoreError, ConfigError) as exc:  # ConfigError: e.g. aclEnable with a missing or invalid ACL file
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        await loop.run_in_executor(None, controller.store.shutdown)
        return 1
    grpc = f" grpc_port={controller.grpc_port}" if controller.grpc is not None else ""
    metrics = f" metrics_port={controller.metrics_port}" if controller.metrics is not None else ""
    print(f"READY port={bound}{grpc}{metrics}", flush=True)
    await stop.wait()
    logging.getLogger("broker_core").info("shutting down")
    await controller.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, _, port_text = args.listen.rpartition(":")
    if not host or not port_text.isdigit():
        print(f"error: --listen must be HOST:PORT, got {args.listen!r}", file=sys.stderr)
        return 2
    overrides = {"listen_port": int(port_text)}
    grpc_host = None
    if args.grpc_listen is not None:
        grpc_host, _, grpc_port = args.grpc_listen.rpartition(":")
        if not grpc_host or not grpc_port.isdigit():
            print(f"error: --grpc-listen must be HOST:PORT, got {args.grpc_listen!r}", file=sys.stderr)
            return 2
        overrides["grpc_listen_port"] = int(grpc_port)
    if args.namesrv is not None:
        overrides["namesrv_addr"] = args.namesrv
    try:
        config = BrokerConfig.load(args.config, overrides=overrides).with_store_dir(args.store_dir).validate()
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for key in config.unknown_keys:
        logging.getLogger("broker_core").info("broker.conf key %s is not used by this broker", key)
    return loops.run(serve(config, host, int(port_text), grpc_host))


if __name__ == "__main__":
    raise SystemExit(main())
