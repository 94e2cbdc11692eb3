"""A writer process for crash tests: appends until killed, printing ``ACK <n> <queue_id> <queue_offset>``
after each put that returned PUT_OK (so the test knows exactly what was acknowledged).

    python -m tests.integration.crash_writer STORE_DIR SYNC_FLUSH|ASYNC_FLUSH [THREADS]
"""

from __future__ import annotations

import sys
import threading

from broker_core.store import MessageStore
from broker_core.store.message import MessageInner
from tests.conftest import small_config


def main() -> None:
    store_dir, flush_type = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    cfg = small_config(store_dir, flush_disk_type=flush_type, mapped_file_size_commit_log_bytes=256 * 1024,
                       mapped_file_size_consume_queue_bytes=20 * 1000, max_index_num=5000, max_hash_slot_num=1000,
                       flush_interval_consume_queue_ms=50, flush_interval_commit_log_ms=50)
    store = MessageStore(cfg).start()
    print("STARTED", flush=True)
    lock = threading.Lock()
    counter = iter(range(10**9))

    def work() -> None:
        while True:
            with lock:
                n = next(counter)
            r = store.put_message(MessageInner("Crash", b"body-%08d" % n + b"#" * (n % 700), n % 4,
                                               keys=f"key-{n}", uniq_key=f"U{n:08d}"))
            if r.ok:
                with lock:
                    sys.stdout.write(f"ACK {n} {n % 4} {r.queue_offset}\n")
                    sys.stdout.flush()

    for _ in range(threads):
        threading.Thread(target=work, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
