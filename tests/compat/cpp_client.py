"""Drive the Apache RocketMQ C++ client core (PyPI ``rocketmq`` 0.4.4, which bundles ``librocketmq.so``) for the
compatibility tests. Runs under ``.venv-rocketmq/bin/python``, never the project's venv (the module name
``rocketmq`` is the client's own). One JSON command in argv[1] (or on stdin), one JSON result on stdout:

- ``{"op": "produce", "namesrv", "group", "mode": "sync"|"oneway"|"orderly", "messages": [{"topic", "body",
  "keys", "tags", "props": {..}, "delay": level, "arg": int}]}`` -> ``{"results": [{"status", "msg_id",
  "offset"}]}`` (oneway: no results)
- ``{"op": "pull", "namesrv", "group", "topic", "expression", "props": [names]}`` -> every queue pulled from
  offset 0 until the broker says NO_NEW_MSG: ``{"messages": [...], "statuses": [...], "queues": n}``. A pull
  that the broker holds until the client gives up shows as ``BROKER_TIMEOUT`` and ends that queue.
- ``{"op": "push", "namesrv", "group", "topic", "expression", "expect", "timeout", "settle",
  "reconsume_later_once", "props": [names]}`` -> ``{"messages": [...]}``: consumes until ``expect`` messages
  succeeded, then ``settle`` more seconds (to catch extra deliveries), then shuts down (committing offsets).
  With ``reconsume_later_once`` each message id is answered RECONSUME_LATER the first time it is seen.
- ``{"op": "failover", "namesrv", "group", "topic", "stop_file", "interval"}`` -> a producer (sync sends, one at a
  time, keys ``cpp-N``) and a push consumer (group ``<group>-c``) in one process, until ``stop_file`` exists:
  one JSON line per event as it happens (``{"sent": key, "t0", "t"}``, ``{"fail": text, "key", "t0", "t"}``,
  ``{"got": key, "t"}``, wall-clock seconds), then ``{"done": true}``. For the failover tests: the client is never
  restarted while the master is killed.

Every command may carry ``"credentials": {"access_key", "secret_key", "channel"}``: the client then signs its
requests (``set_session_credentials``, RocketMQ ACL). ``produce`` with ``"capture_errors": true`` reports a failed
send as ``{"error": text}`` in its results instead of failing the command.
"""

from __future__ import annotations

import base64
import ctypes
import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage, _to_bytes
from rocketmq.ffi import _CMessageQueue, _CPullStatus, dll

CONSUME_SUCCESS, RECONSUME_LATER = 0, 1


def as_message(spec: dict) -> Message:
    msg = Message(spec["topic"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    for k, v in (spec.get("props") or {}).items():
        msg.set_property(k, v)
    if spec.get("delay"):
        msg.set_delay_time_level(int(spec["delay"]))
    msg.set_body(base64.b64decode(spec["body"]))
    return msg


def text(value: bytes | str | None) -> str | None:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def describe(m: RecvMessage, props: list[str]) -> dict:
    """A received message as JSON. The binding reads the body as a C string: bytes after a NUL are lost, so
    the tests send bodies without NUL bytes."""
    return {"topic": m.topic, "body": base64.b64encode(m.body).decode(), "keys": text(m.keys), "tags": text(m.tags),
            "id": m.id, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "reconsume_times": m.reconsume_times, "props": {p: text(m.get_property(p)) for p in props},
            "store_timestamp": m.store_timestamp}


def with_credentials(client: Producer | PushConsumer | PullConsumer, cmd: dict) -> None:
    creds = cmd.get("credentials")
    if creds:
        client.set_session_credentials(creds["access_key"], creds["secret_key"], creds.get("channel", "ALIYUN"))


def produce(cmd: dict) -> dict:
    p = Producer(cmd["group"], timeout=10000)
    p.set_namesrv_addr(cmd["namesrv"])
    with_credentials(p, cmd)
    p.start()
    results = []
    try:
        for spec in cmd["messages"]:
            msg = as_message(spec)
            if cmd["mode"] == "oneway":
                p.send_oneway(msg)
                continue
            try:
                res = p.send_orderly(msg, int(spec["arg"])) if cmd["mode"] == "orderly" else p.send_sync(msg)
            except Exception as exc:  # the binding raises its own exception types for every failure
                if not cmd.get("capture_errors"):
                    raise
                results.append({"error": str(exc)})
                continue
            results.append({"status": res.status.name, "msg_id": res.msg_id, "offset": res.offset})
    finally:
        p.shutdown()
    return {"results": results}


def pull(cmd: dict) -> dict:
    c = PullConsumer(cmd["group"])
    c.set_namesrv_addr(cmd["namesrv"])
    with_credentials(c, cmd)
    c.start()
    out, statuses = [], []
    try:
        queues = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        dll.FetchSubscriptionMessageQueues(c._handle, _to_bytes(cmd["topic"]), ctypes.pointer(queues),
                                           ctypes.pointer(size))
        for i in range(size.value):
            offset = 0
            while True:
                res = dll.Pull(c._handle, ctypes.pointer(queues[i]), _to_bytes(cmd.get("expression", "*")),
                               ctypes.c_longlong(offset), 32)
                status = _CPullStatus(res.pullStatus).name
                statuses.append(status)
                if status == "FOUND":
                    out += [describe(RecvMessage(res.msgFoundList[j]), cmd.get("props", []))
                            for j in range(res.size)]
                if status != "BROKER_TIMEOUT":
                    offset = res.nextBeginOffset
                dll.ReleasePullResult(res)
                if status in ("NO_NEW_MSG", "BROKER_TIMEOUT"):
                    break
        dll.ReleaseSubscriptionMessageQueue(queues)
        return {"messages": out, "statuses": statuses, "queues": size.value}
    finally:
        c.shutdown()


def push(cmd: dict) -> dict:
    c = PushConsumer(cmd["group"])
    c.set_namesrv_addr(cmd["namesrv"])
    with_credentials(c, cmd)
    lock = threading.Lock()
    seen: set[str] = set()
    done: list[dict] = []

    def on_message(_consumer, raw) -> int:  # type: ignore[no-untyped-def]
        m = RecvMessage(raw)
        with lock:
            if cmd.get("reconsume_later_once") and m.id not in seen:
                seen.add(m.id)
                return RECONSUME_LATER
            done.append(describe(m, cmd.get("props", [])))
        return CONSUME_SUCCESS

    # Subscribe through the native call: the binding's subscribe() turns every outcome into success
    dll.Subscribe(c._handle, _to_bytes(cmd["topic"]), _to_bytes(cmd.get("expression", "*")))
    c._register_callback(on_message)
    c.start()
    deadline = time.monotonic() + float(cmd.get("timeout", 60))
    try:
        while time.monotonic() < deadline:
            with lock:
                if len(done) >= int(cmd["expect"]):
                    break
            time.sleep(0.05)
        time.sleep(float(cmd.get("settle", 0)))
    finally:
        c.shutdown()
    with lock:
        return {"messages": list(done)}


def failover(cmd: dict) -> dict:
    from pathlib import Path

    out = threading.Lock()

    def emit(**event: object) -> None:
        with out:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    def on_message(_consumer, raw) -> int:  # type: ignore[no-untyped-def]
        emit(got=text(RecvMessage(raw).keys), t=time.time())
        return CONSUME_SUCCESS

    c = PushConsumer(cmd["group"] + "-c")
    c.set_namesrv_addr(cmd["namesrv"])
    dll.Subscribe(c._handle, _to_bytes(cmd["topic"]), b"*")
    c._register_callback(on_message)
    c.start()
    p = Producer(cmd["group"], timeout=3000)
    p.set_namesrv_addr(cmd["namesrv"])
    p.start()
    stop, i = Path(cmd["stop_file"]), 0
    try:
        while not stop.exists():
            key = f"cpp-{i}"
            i += 1
            msg = Message(cmd["topic"])
            msg.set_keys(key)
            msg.set_body(key.encode())
            t0 = time.time()
            try:
                res = p.send_sync(msg)
            except Exception as exc:  # noqa: BLE001 - the binding raises its own exception types for every failure
                emit(fail=str(exc)[:300], key=key, t0=t0, t=time.time())
                time.sleep(0.05)
                continue
            if res.status.name == "OK":
                emit(sent=key, t0=t0, t=time.time())
            else:
                emit(fail=res.status.name, key=key, t0=t0, t=time.time())
            time.sleep(float(cmd.get("interval", 0.01)))
    finally:
        p.shutdown()
        c.shutdown()
    return {"done": True}


def main() -> None:
    cmd = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    result = {"produce": produce, "pull": pull, "push": push, "failover": failover}[cmd["op"]](cmd)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
