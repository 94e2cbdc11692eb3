"""Helper for the recovery benchmark: fill a store with ~N GiB of 1 KiB messages, print FILLED, and wait
to be killed (SIGKILL leaves the ``abort`` file and no clean shutdown)."""

from __future__ import annotations

import os
import sys
import threading

from broker_core.config import BrokerConfig
from broker_core.store import MessageStore
from broker_core.store.message import MessageInner


def main() -> None:
    store_dir, gib = sys.argv[1], float(sys.argv[2])
    cfg = BrokerConfig().with_store_dir(store_dir)
    cfg.retention.clean_resource_interval_ms = 0
    store = MessageStore(cfg).start()
    body = os.urandom(1024)
    target = int(gib * 2**30)
    i = 0
    while store.commit_log.max_offset() < target:
        store.put_messages([MessageInner("Recover", body, (i + j) % 8, keys=f"k{i + j}") for j in range(256)])
        i += 256
    store.dispatch(timeout=300)
    print("FILLED", i, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
