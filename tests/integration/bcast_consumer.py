"""A BROADCASTING push consumer in its own process, for the restart tests: consumes ``argv[2]`` from the first
offset of the name server ``argv[1]``, group ``argv[3]``, instance name ``argv[4]``, offsets under ``argv[5]``,
persisting them every 0.1 s. Prints ``READY`` once it owns the topic's queues, then one line per message,
``<broker>#<queue>#<offset> <body>``, flushed, until killed or stdin closes."""

from __future__ import annotations

import sys
import threading

from broker_core.client import ConsumeStatus, MessageExt, PushConsumer

lock = threading.Lock()


def listener(msgs: list[MessageExt]) -> ConsumeStatus:
    with lock:
        for m in msgs:
            sys.stdout.write(f"{m.broker_name}#{m.queue_id}#{m.queue_offset} {m.body.decode()}\n")
        sys.stdout.flush()
    return ConsumeStatus.CONSUME_SUCCESS


def main() -> None:
    namesrv, topic, group, instance, offsets = sys.argv[1:6]
    consumer = PushConsumer(group, namesrv, message_model="BROADCASTING", consume_from="FIRST",
                            instance_name=instance, offset_store_dir=offsets, persist_offset_interval=0.1,
                            rebalance_interval=1.0)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    while not consumer.assigned_queues(topic):
        threading.Event().wait(0.05)
    with lock:  # the listener writes from another thread: one line at a time
        sys.stdout.write("READY\n")
        sys.stdout.flush()
    sys.stdin.read()  # until the test closes stdin (a clean stop) or kills the process
    consumer.shutdown()


if __name__ == "__main__":
    main()
