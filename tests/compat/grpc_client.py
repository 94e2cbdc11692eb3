"""Drive the official RocketMQ 5 Python client (PyPI ``rocketmq-python-client`` 5.1.2, pinned in requirements.txt)
against a broker's gRPC endpoint, for tests/compat/test_grpc_*.py and bench/grpc.py. ``"tls": true`` in a
produce or receive command connects over TLS (the roots from ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``). Runs in its
own process (``python tests/compat/grpc_client.py '<json>'``): the client starts threads and writes its log under
``$HOME/logs/rocketmq_python``, so the tests give it a temporary HOME. One JSON command in argv[1], one JSON
result on stdout. Bodies are UTF-8 text. ``"ak"`` and ``"sk"`` in a command: the client's credentials.

- ``{"op": "produce", "endpoint", "mode": "sync"|"async", "messages": [{"topic", "body", "tag", "keys": [..],
  "props": {..}, "group": message group, "deliver_at": epoch seconds}]}`` -> ``{"results": [{"message_id",
  "offset"}], "seconds": send time}``
- ``{"op": "transaction", "endpoint", "topic", "messages": [{"body", "keys": [..], "action": "commit"|
  "rollback"|"unknown"}], "check": "commit"|"rollback", "within"}`` -> half messages ended as asked; the
  producer stays up until the server asked its checker about every "unknown" one: ``{"results": [...],
  "checked": [message ids the checker answered]}``
- ``{"op": "receive", "endpoint", "group", "topic", "expect", "within", "invisible", "ack": true}`` ->
  SimpleConsumer receives until ``expect`` messages (acked unless ``"ack": false``): ``{"messages": [...],
  "count", "seconds"}`` (``"count_only": true`` leaves the messages out)
- ``{"op": "redeliver", "endpoint", "group", "topic", "invisible", "change_to", "within"}`` -> receives one
  message invisible for ``invisible`` s; with ``change_to`` changes its invisible duration to that, then
  receives until it comes back and acks that delivery: ``{"first": m, "again": m, "changed_handle_differs"}``
- ``{"op": "exhaust", "endpoint", "group", "topic", "invisible", "quiet"}`` -> receives without acking until no
  delivery came for ``quiet`` s: ``{"messages": [every delivery]}``
- ``{"op": "push", "endpoint", "group", "topic", "expect", "within", "fail_first": bool, "slow": s}`` ->
  PushConsumer with a listener (taking ``slow`` seconds a message) until ``expect`` messages succeeded:
  ``{"messages": [in consume order], "deliveries": [every call of the listener]}``
- ``{"op": "failover", "endpoint", "group", "topic", "stop_file", "interval"}`` -> a Producer (keys ``grpc-N``,
  one send at a time) and a PushConsumer of ``group`` until ``stop_file`` exists, one JSON line per event as it
  happens: ``{"sent": key, "t0", "t"}``, ``{"fail": text, "key", "t0", "t"}``, ``{"got": key, "t"}`` (wall-clock
  seconds), then the result ``{"done": true}``. ``endpoint`` may list several ``host:port`` joined by ``;``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def config(cmd: dict) -> ClientConfiguration:
    return ClientConfiguration(cmd["endpoint"], Credentials(cmd.get("ak", ""), cmd.get("sk", "")), request_timeout=10)


def describe(m: Any) -> dict:
    return {"id": m.message_id, "body": m.body.decode(), "topic": m.topic, "tag": m.tag, "keys": list(m.keys or []),
            "props": dict(m.properties or {}), "group": m.message_group, "attempt": m.delivery_attempt,
            "handle": m.receipt_handle, "corrupted": m.corrupted, "received_ms": int(time.time() * 1000)}


def as_message(spec: dict) -> Message:
    msg = Message()
    msg.topic = spec["topic"]
    msg.body = spec["body"].encode()
    if spec.get("tag"):
        msg.tag = spec["tag"]
    if spec.get("keys"):
        msg.keys = spec["keys"][0]  # the setter takes one key
    for k, v in (spec.get("props") or {}).items():
        msg.add_property(k, v)
    if spec.get("group"):
        msg.message_group = spec["group"]
    if spec.get("deliver_at"):
        msg.delivery_timestamp = int(spec["deliver_at"])
    return msg


def produce(cmd: dict) -> dict:
    topics = sorted({m["topic"] for m in cmd["messages"]})
    producer = Producer(config(cmd), topics, tls_enable=bool(cmd.get("tls")))
    producer.startup()
    try:
        started = time.perf_counter()
        if cmd.get("mode") == "async":
            futures = [producer.send_async(as_message(spec)) for spec in cmd["messages"]]
            receipts = [f.result(timeout=60) for f in futures]
        else:
            receipts = [producer.send(as_message(spec)) for spec in cmd["messages"]]
        seconds = time.perf_counter() - started
        return {"results": [{"message_id": r.message_id, "offset": r.offset} for r in receipts], "seconds": seconds}
    finally:
        producer.shutdown()


class Checker(TransactionChecker):
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.checked: list[str] = []
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        with self.lock:
            self.checked.append(message.message_id)
        return TransactionResolution.COMMIT if self.answer == "commit" else TransactionResolution.ROLLBACK


def transaction(cmd: dict) -> dict:
    checker = Checker(cmd.get("check", "commit"))
    producer = Producer(config(cmd), [cmd["topic"]], checker)
    producer.startup()
    try:
        results, unknown = [], set()
        for spec in cmd["messages"]:
            tx = producer.begin_transaction()
            receipt = producer.send(as_message({**spec, "topic": cmd["topic"]}), tx)
            if spec["action"] == "commit":
                tx.commit()
            elif spec["action"] == "rollback":
                tx.rollback()
            else:
                unknown.add(receipt.message_id)
            results.append({"message_id": receipt.message_id, "transaction_id": receipt.transaction_id})
        deadline = time.monotonic() + cmd.get("within", 60)
        while time.monotonic() < deadline and not unknown <= set(checker.checked):
            time.sleep(0.1)
        time.sleep(0.5)  # the checker's EndTransaction is sent asynchronously
        return {"results": results, "checked": sorted(set(checker.checked))}
    finally:
        producer.shutdown()


def simple(cmd: dict) -> SimpleConsumer:
    consumer = SimpleConsumer(config(cmd), cmd["group"], {cmd["topic"]: FilterExpression(cmd.get("expression", "*"))},
                              tls_enable=bool(cmd.get("tls")),
                              await_duration=cmd.get("await", 5))
    consumer.startup()
    return consumer


def receive(cmd: dict) -> dict:
    consumer = simple(cmd)
    got: list[dict] = []
    try:
        started = time.perf_counter()
        deadline = time.monotonic() + cmd.get("within", 60)
        while len(got) < cmd["expect"] and time.monotonic() < deadline:
            for m in consumer.receive(32, cmd.get("invisible", 30)):
                got.append(describe(m))
                if cmd.get("ack", True):
                    consumer.ack(m)
        seconds = time.perf_counter() - started
        return {"messages": [] if cmd.get("count_only") else got, "count": len(got), "seconds": seconds}
    finally:
        consumer.shutdown()


def redeliver(cmd: dict) -> dict:
    consumer = simple(cmd)
    try:
        deadline = time.monotonic() + cmd.get("within", 60)
        first = None
        while first is None and time.monotonic() < deadline:
            msgs = consumer.receive(1, cmd["invisible"])
            first = msgs[0] if msgs else None
        assert first is not None, "nothing to receive"
        out: dict = {"first": describe(first)}
        if cmd.get("change_to") is not None:
            before = first.receipt_handle
            consumer.change_invisible_duration(first, cmd["change_to"])
            out["changed_handle_differs"] = first.receipt_handle != before
            out["changed_ms"] = int(time.time() * 1000)
        while time.monotonic() < deadline:
            again = [m for m in consumer.receive(1, 30) if m.message_id == first.message_id]
            if again:
                out["again"] = describe(again[0])
                consumer.ack(again[0])
                break
        return out
    finally:
        consumer.shutdown()


def exhaust(cmd: dict) -> dict:
    consumer = simple({**cmd, "await": 2})
    got: list[dict] = []
    try:
        last = time.monotonic()
        while time.monotonic() - last < cmd.get("quiet", 6):
            for m in consumer.receive(32, cmd.get("invisible", 1)):
                got.append(describe(m))
                last = time.monotonic()
        return {"messages": got}
    finally:
        consumer.shutdown()


class Listener(MessageListener):
    def __init__(self, fail_first: bool, slow: float = 0) -> None:
        self.fail_first = fail_first
        self.slow = slow
        self.seen: set[str] = set()
        self.done: list[dict] = []
        self.deliveries: list[dict] = []
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.deliveries.append(describe(message))
        time.sleep(self.slow)
        with self.lock:
            if self.fail_first and message.message_id not in self.seen:
                self.seen.add(message.message_id)
                return ConsumeResult.FAILURE
            self.done.append(describe(message))
        return ConsumeResult.SUCCESS


def push(cmd: dict) -> dict:
    listener = Listener(cmd.get("fail_first", False), cmd.get("slow", 0))
    consumer = PushConsumer(config(cmd), cmd["group"], listener, {cmd["topic"]: FilterExpression("*")},
                            consumption_thread_count=4)
    consumer.startup()
    try:
        deadline = time.monotonic() + cmd.get("within", 60)
        while len(listener.done) < cmd["expect"] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(cmd.get("settle", 0))
        with listener.lock:
            return {"messages": list(listener.done), "deliveries": list(listener.deliveries)}
    finally:
        consumer.shutdown()


def failover(cmd: dict) -> dict:
    import os

    out = threading.Lock()

    def emit(**event: object) -> None:
        with out:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    class Recorder(MessageListener):
        def consume(self, message: Message) -> ConsumeResult:
            emit(got=(list(message.keys or []) or [""])[0], t=time.time())
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(config(cmd), cmd["group"], Recorder(), {cmd["topic"]: FilterExpression("*")},
                            consumption_thread_count=2)
    consumer.startup()
    producer = Producer(config(cmd), [cmd["topic"]])
    producer.startup()
    i = 0
    try:
        while not os.path.exists(cmd["stop_file"]):
            key = f"grpc-{i}"
            i += 1
            msg = Message()
            msg.topic, msg.body, msg.keys = cmd["topic"], key.encode(), key  # the setter takes one key
            t0 = time.time()
            try:
                producer.send(msg)
            except Exception as exc:  # noqa: BLE001 - the client raises its own exception types for every failure
                emit(fail=str(exc)[:300], key=key, t0=t0, t=time.time())
                time.sleep(0.05)
                continue
            emit(sent=key, t0=t0, t=time.time())
            time.sleep(float(cmd.get("interval", 0.01)))
    finally:
        producer.shutdown()
        consumer.shutdown()
    return {"done": True}


OPS = {"failover": failover, "produce": produce, "transaction": transaction, "receive": receive, "redeliver": redeliver,
       "exhaust": exhaust, "push": push}

if __name__ == "__main__":
    command = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    result = OPS[command["op"]](command)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
