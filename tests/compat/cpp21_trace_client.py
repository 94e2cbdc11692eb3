"""Drive the Apache RocketMQ C++ 2.1 core (PyPI ``rocketmq-python-cvs`` 2.1.0.3) with message trace on, for
tests/compat/test_cpp21_trace.py. Runs under ``.venv-rocketmq21/bin/python``.

The binding's Python wrapper has no trace switch, but its bundled ``librocketmq.so`` exports the C API's
``SetProducerMessageTrace`` / ``SetPushConsumerMessageTrace`` (``CTraceModel``: ``OPEN`` = 0, ``CLOSE`` = 1; the
library maps 0 to ``setMessageTrace(true)``); they are called through the binding's ctypes handle.

One JSON command on stdin (first line): ``{"namesrv", "producer_group", "consumer_group", "topic", "keys",
"tags", "log_dir"}``. The producer sends one message and the push consumer (CLUSTERING, from the first offset)
consumes it; then one JSON line on stdout ``{"msg_id", "queue_offset", "consumed": [msg ids]}``, and both clients
stay up (their trace dispatchers keep sending) until a second line on stdin, after which they shut down.
"""

from __future__ import annotations

import json
import sys
import threading
from ctypes import c_int, c_void_p
from typing import Any

from rocketmq.client import Message, Producer, PushConsumer, ffi_check
from rocketmq.ffi import _CLogLevel, dll

TRACE_OPEN = 0  # CTraceModel.OPEN (CCommon.h)

dll.SetProducerMessageTrace.argtypes = [c_void_p, c_int]
dll.SetProducerMessageTrace.restype = c_int
dll.SetPushConsumerMessageTrace.argtypes = [c_void_p, c_int]
dll.SetPushConsumerMessageTrace.restype = c_int


def main() -> None:
    cmd = json.loads(sys.stdin.readline())
    p = Producer(cmd["producer_group"], timeout=10000)
    p.set_namesrv_addr(cmd["namesrv"])
    p.set_log_root_path(cmd["log_dir"])
    ffi_check(dll.SetProducerLogLevel(p._handle, _CLogLevel.INFO))
    ffi_check(dll.SetProducerMessageTrace(p._handle, TRACE_OPEN))
    p.start()
    msg = Message(cmd["topic"])
    msg.set_keys(cmd["keys"])
    msg.set_tags(cmd["tags"])
    msg.set_body(b"traced by the C++ 2.1 client")
    sent = p.send_sync(msg)

    consumed: list[str] = []
    done = threading.Event()

    def on_message(m: Any) -> None:  # a rocketmq.client.RecvMessage
        consumed.append(m.id)
        if m.id == sent.msg_id:
            done.set()

    c = PushConsumer(cmd["consumer_group"])
    c.set_namesrv_addr(cmd["namesrv"])
    c.set_log_root_path(cmd["log_dir"])
    ffi_check(dll.SetPushConsumerMessageTrace(c._handle, TRACE_OPEN))
    c.subscribe(cmd["topic"], on_message)
    c.start()
    ok = done.wait(120)
    sys.stdout.write(json.dumps({"msg_id": sent.msg_id, "queue_offset": sent.offset,
                                 "consumed": consumed if ok else []}) + "\n")
    sys.stdout.flush()
    sys.stdin.readline()  # the test has seen the trace records (or gave up)
    c.shutdown()
    p.shutdown()


if __name__ == "__main__":
    main()
