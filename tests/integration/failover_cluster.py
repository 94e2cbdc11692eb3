"""Controller-mode broker groups as real processes (no tests here): controllers, a name server and the brokers of
one group with ``enableControllerMode=true``; SDK producers that log every acknowledged send; the checker of the
failover suites and ``bench.failover``.

The checker's rules (issue 34):
1. every acknowledged message is read back (by key) from the group;
2. no (queue, queue offset) holds two different messages: neither two acks naming the same position for different
   keys, nor an ack whose position reads back a different key;
3. per queue, an orderly producer's acknowledged sequence numbers are read back in increasing order;
4. no broker accepted a write in an epoch that was not its own: every epoch entry of every broker's epoch file
   (GET_BROKER_EPOCH_CACHE) agrees with the group's history (one start offset per epoch), so each CommitLog range
   was written by the one master of its epoch.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_core.client import AdminClient, ClientError, Message, Producer, PullConsumer
from broker_core.remoting.client import run_sync
from tests.integration.cluster import BrokerProcess, _start, stop_process, wait_until
from tests.integration.controller_procs import controller_confs, start_controller

GROUP = "broker-fo"
TOPIC = "TopicFailover"


def controller_mode_conf(controllers: list[str], extra: str = "") -> str:
    return ("enableControllerMode=true\n"
            f"controllerAddr={';'.join(controllers)}\n"
            "allAckInSyncStateSet=true\n"
            "defaultTopicQueueNums=4\n" + extra)


@dataclass
class FailoverGroup:
    tmp: Path
    controllers: int = 1
    brokers: int = 3
    broker_extra: str = ""
    controller_extra: str = ""
    controller_procs: list[Any] = field(default_factory=list)
    controller_addrs: list[str] = field(default_factory=list)
    controller_files: list[Path] = field(default_factory=list)
    members: list[BrokerProcess] = field(default_factory=list)
    namesrv: str = ""
    namesrv_proc: Any = None

    def start(self) -> FailoverGroup:
        self.controller_files, self.controller_addrs = controller_confs(self.tmp, self.controllers,
                                                                        self.controller_extra)
        for i, conf in enumerate(self.controller_files):
            self.controller_procs.append(start_controller(conf, self.tmp / f"controller-n{i}.log"))
        self.namesrv_proc, port = _start(["-m", "broker_core.namesrv", "--listen", "127.0.0.1:0",
                                          "--scan-interval-ms", "500", "--broker-expire-ms", "5000"],
                                         self.tmp / "namesrv.log")
        self.namesrv = f"127.0.0.1:{port}"
        conf = controller_mode_conf(self.controller_addrs, self.broker_extra)
        for i in range(self.brokers):
            (self.tmp / f"b{i}").mkdir(parents=True, exist_ok=True)
            b = BrokerProcess(GROUP, self.tmp / f"b{i}" / "store", self.namesrv, self.tmp / f"b{i}.log", conf)
            self.members.append(b.start())
            if i == 0:
                self.wait_master()
        self.wait_in_sync(self.brokers)
        return self

    def runtime(self, b: BrokerProcess) -> dict[str, str] | None:
        if b.proc is None or b.proc.poll() is not None:
            return None
        try:
            with AdminClient(self.namesrv) as admin:
                return {k: str(v) for k, v in admin.broker_runtime(b.addr).items()}
        except (ClientError, ConnectionError, TimeoutError, OSError):
            return None

    def master(self) -> BrokerProcess | None:
        """The running broker that is master of the newest epoch (None while there is none)."""
        best: tuple[int, BrokerProcess] | None = None
        for b in self.members:
            info = self.runtime(b)
            if info and info.get("fenced") == "False" and info.get("role") == "SYNC_MASTER":
                epoch = int(info.get("masterEpoch", "0"))
                if best is None or epoch > best[0]:
                    best = (epoch, b)
        return best[1] if best else None

    def wait_master(self, not_this: BrokerProcess | None = None, timeout: float = 60) -> BrokerProcess:
        found: list[BrokerProcess] = []

        def ok() -> bool:
            m = self.master()
            if m is not None and m is not not_this:
                found.append(m)
                return True
            return False

        wait_until(ok, timeout, "a master")
        return found[-1]

    def wait_in_sync(self, n: int, timeout: float = 60) -> None:
        def ok() -> bool:
            m = self.master()
            info = self.runtime(m) if m else None
            return bool(info) and len(eval_list(info.get("syncStateSet", "[]"))) >= n  # type: ignore[union-attr]
        wait_until(ok, timeout, f"a SyncStateSet of {n}")

    def epoch_caches(self) -> dict[str, list[tuple[int, int]]]:
        out = {}
        for b in self.members:
            info = self.runtime(b)
            if info is not None:
                out[b.addr] = [tuple(e) for e in eval_list(info.get("epochEntries", "[]"))]
        return out

    def close(self) -> None:
        for b in self.members:
            if b.proc is not None and b.proc.poll() is None:
                try:
                    b.proc.send_signal(18)  # SIGCONT, in case a nemesis left it stopped
                except OSError:
                    pass
                stop_process(b.proc, 30)
        if self.namesrv_proc is not None:
            stop_process(self.namesrv_proc, 30)
        for p in self.controller_procs:
            try:
                p.send_signal(18)
            except OSError:
                pass
            stop_process(p, 30)


def eval_list(text: str) -> list[Any]:
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


@dataclass
class Ack:
    key: str
    queue_id: int
    queue_offset: int
    at: float  # time.monotonic() of the answer
    seq: int = -1  # orderly producers: the sequence number within its queue
    store: str = ""  # the broker that stored it (host:port, from the offset message id)


class LoggingProducer(threading.Thread):
    """Sends ``TOPIC`` messages until stopped, one at a time (sync), retrying a message until it is acknowledged
    (SEND_OK); every acknowledged send goes to ``acks``. ``orderly_queue``: all to one queue, with a sequence
    number in the key (per-queue order is then checked). ``plain``: a producer with the SDK's defaults that does
    nothing of its own after a failure but wait 50 ms (no route re-read): it must follow a failover by itself."""

    def __init__(self, namesrv: str, name: str, orderly_queue: int | None = None, plain: bool = False) -> None:
        super().__init__(daemon=True, name=f"producer-{name}")
        self.namesrv, self.tag, self.orderly_queue, self.plain = namesrv, name, orderly_queue, plain
        self.acks: list[Ack] = []
        self.failures: list[tuple[float, str]] = []
        self.stop_event = threading.Event()
        self.producer = (Producer(f"pg-{name}", namesrv) if plain else Producer(f"pg-{name}", namesrv,
                                                                                 send_timeout=3.0)).start()

    def run(self) -> None:
        seq = 0
        while not self.stop_event.is_set():
            key = f"{self.tag}-{seq}"
            msg = Message(TOPIC, key.encode() * 4, keys=key)
            try:
                if self.orderly_queue is not None:
                    r = self.producer.send(msg, selector=lambda qs, m, a: qs[a % len(qs)], arg=self.orderly_queue)
                else:
                    r = self.producer.send(msg)
            except (ClientError, ConnectionError, TimeoutError, OSError) as exc:
                self.failures.append((time.monotonic(), str(exc)[:200]))
                self._refresh()
                self.stop_event.wait(0.05)
                continue
            if r.status.name != "SEND_OK":
                self.failures.append((time.monotonic(), r.status.name))
                self._refresh()
                continue
            self.acks.append(Ack(key, r.queue_id, r.queue_offset, time.monotonic(), seq, store_of(r.offset_msg_id)))
            seq += 1

    def _refresh(self) -> None:
        """After a failed send, ask the name server for the route at once (the SDK also does so itself since it
        re-reads the route on a refused connection, a timeout, 14 and SYSTEM_ERROR; kept here for the nemesis's
        figures); plain producers do nothing."""
        if self.plain:
            return
        try:
            run_sync(self.producer.instance.route(TOPIC, refresh=True), 5.0)
        except (ClientError, ConnectionError, TimeoutError, OSError):
            pass

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        self.producer.shutdown()


def store_of(offset_msg_id: str) -> str:
    """``host:port`` of the broker named by an offset message id (IPv4: 4-byte host, 4-byte port, 8-byte offset)."""
    try:
        raw = bytes.fromhex(offset_msg_id[:16])
    except ValueError:
        return ""
    return f"{'.'.join(str(b) for b in raw[:4])}:{int.from_bytes(raw[4:8], 'big')}" if len(raw) == 8 else ""


def read_group(namesrv: str, group: str = "fo-checker", settle_s: float = 1.0) -> dict[tuple[int, int], str]:
    """Every message of ``TOPIC`` as ``{(queue id, queue offset): key}``, pulled from offset 0 of each queue until
    nothing more comes."""
    consumer = PullConsumer(group, namesrv).start()
    try:
        queues = consumer.fetch_queues(TOPIC)
        offsets = dict.fromkeys(queues, 0)
        out: dict[tuple[int, int], str] = {}
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < settle_s:
            got = 0
            for mq in queues:
                try:
                    res = consumer.pull(mq, offsets[mq], 256)
                except (ClientError, ConnectionError, TimeoutError):
                    continue
                for m in res.messages:
                    out[(mq.queue_id, m.queue_offset)] = m.keys[0] if m.keys else ""
                got += len(res.messages)
                offsets[mq] = res.next_begin_offset
            if got:
                quiet_since = time.monotonic()
        return out
    finally:
        consumer.shutdown()


def check(acks: list[Ack], read: dict[tuple[int, int], str], epoch_caches: dict[str, list[tuple[int, int]]],
          orderly: bool = False) -> list[str]:
    """The checker's rules (module docstring); returns the violations (empty: all hold)."""
    problems = []
    by_pos: dict[tuple[int, int], str] = {}
    for a in acks:
        pos = (a.queue_id, a.queue_offset)
        if by_pos.setdefault(pos, a.key) != a.key:
            problems.append(f"two acks at queue {pos[0]} offset {pos[1]}: {by_pos[pos]} and {a.key}")
    keys_read = set(read.values())
    lost = [a.key for a in acks if a.key not in keys_read]
    if lost:
        problems.append(f"{len(lost)} acknowledged messages not read back, e.g. {lost[:5]}")
    for a in acks:
        got = read.get((a.queue_id, a.queue_offset))
        if got is not None and got != a.key:
            problems.append(f"queue {a.queue_id} offset {a.queue_offset} acked for {a.key} reads back {got}")
    if orderly:  # per queue and producer, acknowledged sequence numbers in read order (queue offset) must increase
        acked = {a.key for a in acks}
        per_queue: dict[tuple[int, str], list[int]] = {}
        for (queue, _), key in sorted(read.items()):
            if key in acked:
                tag, _, seq = key.rpartition("-")
                per_queue.setdefault((queue, tag), []).append(int(seq))
        for (queue, tag), seqs in per_queue.items():
            if seqs != sorted(seqs):
                problems.append(f"queue {queue}: producer {tag}'s acknowledged messages read back out of order")
    starts: dict[int, set[int]] = {}
    for entries in epoch_caches.values():
        for epoch, start in entries:
            starts.setdefault(epoch, set()).add(start)
    for epoch, s in starts.items():
        if len(s) > 1:
            problems.append(f"epoch {epoch} starts at {sorted(s)} on different brokers")
    return problems
