"""``python -m broker_core``: run a broker's store process.

Opens (and recovers) the store directory, runs the store's background services (dispatch, flush,
pre-allocation, retention), prints ``READY store=<dir>`` once the store is open, and shuts down cleanly
on SIGTERM or SIGINT (flush, checkpoint, remove ``abort``), exit code 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from broker_core.config import BrokerConfig, ConfigError
from broker_core.store import MessageStore
from broker_core.store.errors import StoreError


def build_parser() -> argparse.ArgumentParser:
    keys = "\n".join(f"  {k:34} {f.metadata['doc']} (default {f.default!r})"
                     for k, f in BrokerConfig.keys().items() if k == f.metadata["key"])
    return argparse.ArgumentParser(
        prog="python -m broker_core",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a broker_core broker on a store directory.",
        epilog="broker.conf keys (each also settable as BROKER_CORE_<KEY_IN_UPPER_SNAKE_CASE>):\n" + keys,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.add_argument("--store-dir", required=True, help="store directory (overrides every store path in the config)")
    parser.add_argument("--config", help="a RocketMQ-style broker.conf file")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.load(args.config).with_store_dir(args.store_dir).validate()
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for key in config.unknown_keys:
        logging.getLogger("broker_core").info("broker.conf key %s is not used by this broker", key)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        store = MessageStore(config).start()
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"READY store={config.store_path_root_dir}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        store.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
