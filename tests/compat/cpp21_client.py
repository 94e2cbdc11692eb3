"""Drive the Apache RocketMQ C++ 2.1 core (PyPI ``rocketmq-python-cvs`` 2.1.0.3, bundling ``librocketmq.so``) for
tests/compat/test_cpp21_first_send.py. Runs under ``.venv-rocketmq21/bin/python``. One JSON command on stdin, one
JSON line on stdout:

``{"namesrv", "group", "topic", "threads", "log_dir", "warm"}`` -> one fresh producer (its log at DEBUG under
``log_dir``); with ``warm`` it first sends one message alone; then ``threads`` threads wait at a barrier and each
sends one message at once: ``{"warm": result or null, "results": [{"ok": bool, "error": text, "msg_id"}]}``.
"""

from __future__ import annotations

import json
import sys
import threading

from rocketmq.client import Message, Producer, ffi_check
from rocketmq.exceptions import RocketMQException
from rocketmq.ffi import _CLogLevel, dll


def main() -> None:
    cmd = json.loads(sys.stdin.read())
    p = Producer(cmd["group"], timeout=10000)
    p.set_namesrv_addr(cmd["namesrv"])
    if cmd.get("log_dir"):
        p.set_log_root_path(cmd["log_dir"])
        ffi_check(dll.SetProducerLogLevel(p._handle, _CLogLevel.DEBUG))
    p.start()
    warm = None
    if cmd.get("warm"):
        msg = Message(cmd["topic"])
        msg.set_body(b"warm")
        warm = {"ok": True, "msg_id": p.send_sync(msg).msg_id}
    n = int(cmd["threads"])
    barrier = threading.Barrier(n)
    results: list[dict] = [{} for _ in range(n)]

    def send(i: int) -> None:
        msg = Message(cmd["topic"])
        msg.set_body(f"first-{i}".encode())
        barrier.wait()
        try:
            r = p.send_sync(msg)
            results[i] = {"ok": True, "msg_id": r.msg_id}
        except RocketMQException as exc:  # the binding raises its subclasses for every failure
            results[i] = {"ok": False, "error": str(exc)}

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.shutdown()
    sys.stdout.write(json.dumps({"warm": warm, "results": results}) + "\n")


if __name__ == "__main__":
    main()
