"""Cost as the work grows: how the broker's figures bend from ten topics to fifty thousand, from one client
connection to thousands, from 100 B messages to 4 MiB, and a consumer catching up a deep queue from disk.

``python -m bench.scale`` runs every curve and prints one table (figure, value, target, ratio) and writes one PNG
chart per curve (``--out``, default ``bench/results/``); ``--curves`` picks curves, ``--topics``,
``--connections``, ``--sizes`` and ``--depth`` the points, ``--quick`` small points for a first look
(``--help``). A benchmark, never a test: the figures depend on the machine and on what else runs on it.

Curves (each on a fresh name server and broker, subprocesses in a temp dir, ASYNC_FLUSH, ``compressedRegister=true``
and ``forceRegister=false``, ``registerNameServerPeriod=2000`` so heartbeats are seen within the run):

* **topics**: topics of ``--queues`` queues created in steps up to each point with UPDATE_AND_CREATE_TOPIC_LIST
  (18, 10k a request). Per point: ``create_s`` (the step's requests, each answered after the broker wrote
  topics.json and registered); ``reg_build_ms``: the broker's code building its compressed registration of that
  many topics (run in the bench process; in the broker it runs in a thread, off the event loop), every topic's
  line rendered; ``reg_rebuild_ms``: the same after one more topic (cached lines joined, deflated); ``reg_kib``
  / ``reg_ms``: the broker's last full REGISTER_BROKER on the wire (a relay between broker and name server
  counts it) and its round trip there (first byte to answer: the name server inflates and applies it);
  ``hb_bytes``: a periodic heartbeat with the topics unchanged (QUERY_DATA_VERSION);
  ``rss_b_per_queue``: (broker RSS - its RSS before any topic) / queues; ``route_p99_ms``: GET_ROUTEINFO_BY_TOPIC
  of random topics; ``send_p99_ms``: a producer's synchronous 1 KiB sends spread over up to ``--send-topics``
  (1,000) random topics (first, ``first_send_p99_ms``: one send per queue of each, which learns the routes and
  creates the queues' ConsumeQueue files); ``rest_p99_ms`` / ``page_p99_ms``: the console's REST list
  (``/api/v1/topics/?page_size=100``) and topic list page (``--console``: Django runserver), ``--console-rounds``
  requests each (100), the background refresh of the console's cache included when it falls into them.
* **groups**: N subscription groups (``--groups``) written into the stopped broker's ``subscriptionGroup.json``
  (RocketMQ's ``SubscriptionGroupWrapper``; UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) rewrites the whole file per
  group, so 10k of them take minutes), the broker restarted on it, then the console's REST group list
  (``/api/v1/consumer-groups/?page_size=100``: ``rest_p99_ms``), the same searched (``?search=G0001``:
  ``search_p99_ms``) and the group list page (``/groups/``, 100 groups with their lag: ``page_p99_ms``).
* **connections**: N client connections (bench/scale_clients.py, another process; half producers, half
  consumers: 100 in one group, the rest in 100 groups) heartbeating every ``--heartbeat-s`` s (RocketMQ's
  30 s). Per point: broker RSS and CPU over one heartbeat period at idle; ``send_p99_ms`` of one more producer;
  ``rebalance_ms``: a consumer joins the group of 100: from its heartbeat until every member got
  NOTIFY_CONSUMER_IDS_CHANGED and the member list reads the newcomer.
* **size**: per message size, produce (4 requests in flight: batches up to 64 messages / 1 MiB below 64 KiB,
  single uncompressed sends from 64 KiB: :func:`produce_mb_s`; the median of three rounds, each started after
  ``os.sync()`` so no earlier point's dirty pages are written back during it) and consume (pull)
  MB/s of ours and of Redis Streams (XADD pipelined, XREAD; bench/peers.py, same run), beside the disk's
  sequential write rate (1 MiB writes + fdatasync of a file beside the store, same run).
* **depth**: ``--depth`` 1 KiB messages on one queue; the broker is restarted and the page cache dropped
  (``/proc/sys/vm/drop_caches``, root only: the table says whether it worked) so the consumer reads from disk;
  catch-up MB/s (``PullConsumer.pull_ahead``: 1024 messages a pull, two pulls in flight) and the broker's CPU,
  beside the disk's sequential read rate of a cold 512 MiB file and (``commitlog_read_mb_s``) of the CommitLog
  bytes themselves read cold right after the catch-up. 10M messages (10 GiB) by default: about 4 minutes, most
  of it producing them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers import quantiles_ms
from broker_core.client import Message, Producer, PullConsumer
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
UPDATE_AND_CREATE_TOPIC_LIST = 18
CREATE_BATCH = 10_000
MiB = 1 << 20


# ---------------------------------------------------------------------------------------------------- processes
def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Node:
    """A name server and one broker (subprocesses); the broker may reach the name server through a relay."""

    def __init__(self, tmp: Path, relay: bool = False, conf: str = "") -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        ns_port = self._start([sys.executable, "-m", "broker_core.namesrv", "--listen", "127.0.0.1:0"])
        self.namesrv = f"127.0.0.1:{ns_port}"
        self.relay = Relay(("127.0.0.1", ns_port)) if relay else None
        self.conf = tmp / "broker.conf"
        self.conf.write_text("compressedRegister=true\nforceRegister=false\nregisterNameServerPeriod=2000\n"
                             "haListenPort=0\n" + conf)
        self.store = tmp / "store"
        self.broker: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.start_broker()

    def _start(self, args: list[str]) -> int:
        proc = subprocess.Popen(args, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("READY port="):
            raise RuntimeError(f"{args} did not start: {line!r}")
        return int(line.split()[1].split("=")[1])

    def start_broker(self) -> None:
        via = f"127.0.0.1:{self.relay.port}" if self.relay else self.namesrv
        self.port = self._start([sys.executable, "-m", "broker_core", "--store-dir", str(self.store), "--listen",
                                 "127.0.0.1:0", "--namesrv", via, "--config", str(self.conf),
                                 "--log-level", "WARNING"])
        self.broker = self.procs[-1]

    def stop_broker(self) -> None:
        assert self.broker is not None
        self.broker.send_signal(signal.SIGTERM)
        self.broker.wait(timeout=120)
        self.procs.remove(self.broker)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.broker is not None
        return self.broker.pid

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self.relay is not None:
            self.relay.close()


@dataclass
class Frame:
    code: int
    size: int
    first_byte: float
    done: float
    opaque: int
    answered: float = 0.0


class Relay:
    """TCP relay that records the frames the broker sends the name server, with the time of their answer."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frames: list[Frame] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [conn, upstream]
            threading.Thread(target=self._pump, args=(conn, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        buf = b""
        first = 0.0
        while True:
            try:
                data = src.recv(1 << 20)
            except OSError:
                break
            if not data:
                break
            now = time.perf_counter()
            if not buf:
                first = now
            buf += data
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                total = struct.unpack(">i", buf[:4])[0]
                frame, buf = buf[4:4 + total], buf[4 + total:]
                hlen = struct.unpack(">i", frame[:4])[0] & 0xFFFFFF
                header = json.loads(frame[4:4 + hlen])
                with self.lock:
                    if requests:
                        self.frames.append(Frame(int(header["code"]), total + 4, first, now, int(header["opaque"])))
                    else:
                        for f in reversed(self.frames):
                            if f.opaque == int(header["opaque"]) and not f.answered:
                                f.answered = now
                                break
                first = now
            try:  # forwarded once recorded: whoever reads the answer finds its request marked answered
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def taken(self) -> list[Frame]:
        with self.lock:
            out, self.frames = self.frames, [f for f in self.frames if not f.answered]
        return out

    def close(self) -> None:
        for s in self.sockets:
            s.close()


# ---------------------------------------------------------------------------------------------------- helpers
def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def registration_build_ms(names: list[str], queues: int) -> tuple[float, float]:
    """The broker's code building its compressed REGISTER_BROKER for these topics (run here, in the bench
    process: the broker's own build is not visible from outside; it runs in a thread there, off the event
    loop): (ms of the first build, every per-topic line rendered; ms of a rebuild after one more topic, the
    cached lines joined and deflated)."""
    from broker_core.config import BrokerConfig
    from broker_core.server import registration
    from broker_core.server.state import TopicConfig, TopicConfigManager

    with tempfile.TemporaryDirectory() as tmp:
        topics = TopicConfigManager(Path(tmp))
        topics.upsert_many([TopicConfig(n, queues, queues) for n in names])
        cfg = BrokerConfig()
        cfg.compressed_register = True
        t0 = time.perf_counter()
        registration.request(cfg, "127.0.0.1:10911", topics, "")
        first = (time.perf_counter() - t0) * 1000
        topics.upsert(TopicConfig("ScaleOneMore", queues, queues))
        t0 = time.perf_counter()
        registration.request(cfg, "127.0.0.1:10911", topics, "")
        return first, (time.perf_counter() - t0) * 1000


def wait_heartbeats(relay: Relay, count: int) -> list[Frame]:
    """The next ``count`` QUERY_DATA_VERSION frames the broker sends (its unchanged periodic heartbeats)."""
    beats: list[Frame] = []

    def enough() -> bool:
        beats.extend(f for f in relay.taken() if f.code == RequestCode.QUERY_DATA_VERSION)
        return len(beats) >= count

    wait_for(enough, 30, f"{count} heartbeats")
    return beats


def p99(samples_ns: list[int]) -> float:
    return quantiles_ms(samples_ns)["p99_ms"] if samples_ns else float("nan")


def send_p99(namesrv: str, topics: list[str], sends: int, body: bytes = b"x" * 1024, warm: int = 1
             ) -> tuple[float, float]:
    """(median of three rounds' p99 of ``sends`` synchronous sends round-robin over ``topics``, p99 of the
    warm-up: ``warm`` sends per topic first, which learn the routes and put a first message on each queue)."""
    producer = Producer(f"scale-p{time.monotonic_ns()}", namesrv).start()
    try:
        first = []
        for _ in range(warm):
            for t in topics:
                t0 = time.perf_counter_ns()
                producer.send(Message(t, body))
                first.append(time.perf_counter_ns() - t0)
        # the median of three rounds' p99: one round's 20 slowest sends of 2,000 moved 2-3x between runs on this
        # shared machine (the p50 and p90 did not move)
        figures = []
        for _ in range(3):
            samples = []
            for i in range(sends):
                t0 = time.perf_counter_ns()
                producer.send(Message(topics[i % len(topics)], body))
                samples.append(time.perf_counter_ns() - t0)
            figures.append(p99(samples))
        return sorted(figures)[1], p99(first)
    finally:
        producer.shutdown()


def create_topics(client: RemotingClient, broker: str, names: list[str], queues: int) -> None:
    for start in range(0, len(names), CREATE_BATCH):
        body = json.dumps({"topicConfigList": [
            {"topicName": n, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
            for n in names[start:start + CREATE_BATCH]]}).encode()
        resp = client.invoke_sync(broker, RemotingCommand.request(UPDATE_AND_CREATE_TOPIC_LIST, {}, body), 600)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"creating topics failed: {resp.remark}")


def http_p99(get: Callable[[], Any], rounds: int) -> float:
    """p99 (ms) of ``rounds`` sequential requests after one untimed warm-up request (it opens the connection and
    fills the console's caches); any answer but 200 raises."""
    get()  # warm: the first request opens the connections and fills the caches
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        resp = get()
        samples.append(time.perf_counter_ns() - t0)
        if resp.status_code != 200:
            raise RuntimeError(f"console answered {resp.status_code}")
    return p99(samples)


Row = dict[str, Any]


# ---------------------------------------------------------------------------------------------------- topics
def topics_curve(points: list[int], queues: int, console: bool, sends: int, routes: int,
                 send_topics: int = 1000, console_rounds: int = 100) -> list[Row]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-topics-"))
    node = Node(tmp, relay=True)
    client = RemotingClient()
    stack = None
    rows: list[Row] = []
    try:
        time.sleep(2)
        base_kib = rss_kib(node.pid)
        if console:
            from bench.rest import Stack

            stack = Stack()
            stack.env["BROKER_CORE_NAMESRV"] = node.namesrv
            stack.start_console()
            session = stack.session()
            page = page_session(stack)
        made = 0
        for n in points:
            names = [f"ScaleT{i:06d}" for i in range(made, n)]
            node.relay.taken() if node.relay else None
            t0 = time.perf_counter()
            create_topics(client, node.addr, names, queues)
            create_s = time.perf_counter() - t0
            made = n
            assert node.relay is not None
            regs = [f for f in node.relay.taken() if f.code == RequestCode.REGISTER_BROKER and f.answered]
            reg = regs[-1] if regs else None
            beats = wait_heartbeats(node.relay, 2)
            all_names = [f"ScaleT{i:06d}" for i in range(n)]
            rng = random.Random(n)
            samples = []
            for _ in range(routes):
                t = rng.choice(all_names)
                t0n = time.perf_counter_ns()
                resp = client.invoke_sync(node.namesrv, RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}), 30)
                samples.append(time.perf_counter_ns() - t0n)
                if resp.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"no route for {t}: {resp.remark}")
            build_ms, rebuild_ms = registration_build_ms(all_names, queues)
            row: Row = {"topics": n, "queues": n * queues, "create_s": create_s,
                        "reg_build_ms": build_ms, "reg_rebuild_ms": rebuild_ms,
                        "reg_kib": reg.size / 1024 if reg else float("nan"),
                        "reg_ms": (reg.answered - reg.first_byte) * 1000 if reg else float("nan"),
                        "hb_bytes": max(f.size for f in beats),
                        "rss_b_per_queue": max(0, rss_kib(node.pid) - base_kib) * 1024 / (n * queues),
                        "route_p99_ms": p99(samples)}
            # every queue of the sampled topics gets a first message before the timed sends (a queue's first
            # message creates its ConsumeQueue file: first_send_p99_ms)
            row["send_p99_ms"], row["first_send_p99_ms"] = send_p99(
                node.namesrv, rng.sample(all_names, min(n, send_topics)), sends, warm=queues)
            if stack is not None:
                row["rest_p99_ms"] = http_p99(lambda: session.get(stack.url + "/api/v1/topics/",
                                                                  params={"page_size": 100}), console_rounds)
                row["page_p99_ms"] = http_p99(lambda: page.get(stack.url + "/topics/"), console_rounds)
            row["broker_rss_mib"] = rss_kib(node.pid) / 1024
            rows.append(row)
            print(f"  topics {n}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()), flush=True)
    finally:
        if stack is not None:
            stack.close()
        node.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


PAGE_USER_SCRIPT = """
from django.contrib.auth import get_user_model
get_user_model().objects.create_superuser("scalepage", "", "scale-page-pw-1")
"""


def page_session(stack: Any) -> Any:
    """A logged-in browser-like session for the HTML pages (Django's login form)."""
    import requests

    stack._manage("shell", "-c", PAGE_USER_SCRIPT)
    s = requests.Session()
    s.get(stack.url + "/login/")
    token = s.cookies.get("csrftoken", "")
    resp = s.post(stack.url + "/login/", data={"username": "scalepage", "password": "scale-page-pw-1",
                                                "csrfmiddlewaretoken": token},
                  headers={"Referer": stack.url + "/login/"})
    if resp.status_code != 200 or "/login/" in resp.url:
        raise RuntimeError(f"console login failed: {resp.status_code} {resp.url}")
    return s


# ---------------------------------------------------------------------------------------------------- groups
def write_groups(store: Path, names: list[str]) -> None:
    """Add subscription groups to a stopped broker's ``subscriptionGroup.json`` (RocketMQ's
    ``SubscriptionGroupWrapper``, its data version raised), as a broker restarted with that many groups reads it."""
    path = store / "config" / "subscriptionGroup.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    table = doc.setdefault("subscriptionGroupTable", {})
    for name in names:
        table[name] = {"groupName": name, "consumeEnable": True, "consumeFromMinEnable": True,
                       "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
                       "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}
    version = doc.get("dataVersion")
    counter = int(version.get("counter", 0)) if isinstance(version, dict) else 0
    doc["dataVersion"] = {"counter": counter + 1, "timestamp": int(time.time() * 1000)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def groups_point(n: int, rounds: int) -> Row:
    """A fresh name server, broker (holding ``n`` groups from its start) and console; the console's figures."""
    from bench.rest import Stack

    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-groups-"))
    node = Node(tmp)
    stack = None
    try:
        node.stop_broker()
        write_groups(node.store, [f"ScaleG{i:06d}" for i in range(n)])
        t0 = time.perf_counter()
        node.start_broker()
        start_s = time.perf_counter() - t0
        stack = Stack()
        stack.env["BROKER_CORE_NAMESRV"] = node.namesrv
        stack.start_console()
        session = stack.session()
        page = page_session(stack)
        url = stack.url + "/api/v1/consumer-groups/"

        def count() -> int:
            resp = session.get(url, params={"search": "scaleg", "page_size": "1"})
            return int(resp.json()["count"]) if resp.status_code == 200 else -1

        wait_for(lambda: count() == n, 60, f"the console to list {n} groups")
        pages = stack.url + "/groups/"
        return {"groups": n, "broker_start_s": start_s,
                "rest_p99_ms": http_p99(lambda: session.get(url, params={"page_size": 100}), rounds),
                "search_p99_ms": http_p99(lambda: session.get(url, params={"search": "G0001", "page_size": "100"}),
                                          rounds),
                "page_p99_ms": http_p99(lambda: page.get(pages), rounds),
                "broker_rss_mib": rss_kib(node.pid) / 1024}
    finally:
        if stack is not None:
            stack.close()
        node.close()
        shutil.rmtree(tmp, ignore_errors=True)


def groups_curve(points: list[int], rounds: int) -> list[Row]:
    rows: list[Row] = []
    for n in points:
        row = groups_point(n, rounds)
        rows.append(row)
        print(f"  groups {n}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()), flush=True)
    return rows


# ---------------------------------------------------------------------------------------------------- connections
def connections_curve(points: list[int], heartbeat_s: float, sends: int) -> list[Row]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-conns-"))
    node = Node(tmp)
    client = RemotingClient()
    rows: list[Row] = []
    try:
        create_topics(client, node.addr, ["ScaleConn"], 8)
        send_p99(node.namesrv, ["ScaleConn"], 10, warm=8)  # the broker's first-send paths, not counted
        for n in points:
            proc = subprocess.Popen([sys.executable, "-m", "bench.scale_clients", node.addr, str(n), "ScaleConn",
                                     str(heartbeat_s)], cwd=ROOT, env=ENV, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                assert proc.stdout is not None and proc.stdin is not None
                line = proc.stdout.readline()
                if not line.startswith("READY"):
                    raise RuntimeError(f"scale_clients did not start: {line!r}")
                time.sleep(2)
                c0, t0 = cpu_s(node.pid), time.monotonic()
                time.sleep(heartbeat_s)  # one heartbeat round of every client
                cpu = (cpu_s(node.pid) - c0) / (time.monotonic() - t0) * 100
                rss = rss_kib(node.pid) / 1024
                p = send_p99(node.namesrv, ["ScaleConn"], sends, warm=8)[0]
                proc.stdin.write("JOIN\n")
                proc.stdin.flush()
                reb = dict(kv.split("=") for kv in proc.stdout.readline().split()[1:])
                row: Row = {"connections": n, "idle_cpu_pct": cpu, "broker_rss_mib": rss, "send_p99_ms": p,
                            "rebalance_ms": float(reb["ms"]), "group_members": int(reb["members"])}
                rows.append(row)
                print(f"  connections {n}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()), flush=True)
                proc.stdin.write("QUIT\n")
                proc.stdin.flush()
                proc.wait(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            time.sleep(2)  # the broker drops the closed connections' clients
    finally:
        node.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


# ---------------------------------------------------------------------------------------------------- disk
def disk_write_mb_s(directory: Path, total: int) -> tuple[float, Path]:
    """Sequential 1 MiB writes of ``total`` bytes, then fdatasync: MB/s (10^6), and the file (for reads)."""
    path = directory / "disk-probe.bin"
    chunk = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    try:
        for _ in range(total // MiB):
            os.write(fd, chunk)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    return total / (time.perf_counter() - t0) / 1e6, path


def drop_caches() -> bool:
    """Write back and drop the clean page cache (root only); False where the machine does not allow it."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def disk_read_mb_s(path: Path) -> tuple[float, bool]:
    cold = drop_caches()
    if not cold:
        os.posix_fadvise(os.open(path, os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED)
    t0 = time.perf_counter()
    size = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(MiB):
            size += len(chunk)
    return size / (time.perf_counter() - t0) / 1e6, cold


# ---------------------------------------------------------------------------------------------------- size
def size_curve(sizes: list[int], budget: int) -> list[Row]:
    from bench.peers import redis_consume, redis_produce_pipelined
    from bench.servers import RedisServer

    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-size-"))
    node = Node(tmp, conf="maxMessageSize=4195328\n")
    client = RemotingClient()
    redis = RedisServer().start()
    rows: list[Row] = []
    try:
        disk_w, probe = disk_write_mb_s(tmp, max(budget, 64 * MiB))
        probe.unlink()
        for size in sizes:
            n = max(8, min(200_000, budget // size))
            body = os.urandom(size)
            topic = f"ScaleSize{size}"
            create_topics(client, node.addr, [topic], 1)
            batch = max(1, min(64, MiB // size))
            # each point starts as the disk probe did, with nothing dirty: the points before it left up to ~0.7 GB
            # in the page cache, whose writeback would otherwise compete with this point's writes (the 4 MiB
            # point measured alone: 0.63-0.73x of the disk; after the others without this: 0.36x)
            # median of three rounds: a round of 256 MiB lasts a fraction of a second at these rates, and one
            # round moved by +-30 % between runs on this shared machine
            rounds = []
            for _ in range(3):
                os.sync()
                rounds.append(produce_mb_s(node.namesrv, topic, n, body, batch))
            ours_p = sorted(rounds)[1]
            ours_c = consume_mb_s(node.namesrv, topic, n, size)
            redis_p = redis_produce_pipelined(redis.url, n, body, batch=batch)["msg_per_s"] * size / 1e6
            redis_c = redis_consume(redis.url, n, body)["msg_per_s"] * size / 1e6
            row: Row = {"size_b": size, "messages": n, "produce_mb_s": ours_p, "consume_mb_s": ours_c,
                        "redis_produce_mb_s": redis_p, "redis_consume_mb_s": redis_c, "disk_write_mb_s": disk_w}
            rows.append(row)
            print(f"  size {size}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()), flush=True)
    finally:
        redis.stop()
        node.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def produce_mb_s(namesrv: str, topic: str, n: int, body: bytes, batch: int, inflight: int = 4) -> float:
    """MB/s of ``n`` messages, ``inflight`` requests at a time: batches of ``batch`` (SEND_BATCH_MESSAGE) below
    64 KiB, single sends from 64 KiB (a batch of big entries is slower than single sends, and a 4 MiB message
    does not fit a 4 MiB batch). Bodies go uncompressed (the SDK compresses single bodies over 4 KiB by
    default, as RocketMQ's clients: zlib at ~40 MB/s would be the figure, and Redis gets no compression)."""
    import asyncio

    from broker_core.remoting.client import run_sync

    producer = Producer(f"scale-size{time.monotonic_ns()}", namesrv, compress_msg_body_over_howmuch=0).start()
    try:
        producer.send(Message(topic, body))  # route and connection, not timed
        single = len(body) >= 64 * 1024

        async def run() -> float:
            sem = asyncio.Semaphore(inflight)

            async def one(count: int) -> None:
                async with sem:
                    if single:
                        await producer.asend(Message(topic, body))
                    else:
                        await producer.asend_batch([Message(topic, body) for _ in range(count)])

            counts = [1] * n if single else [min(batch, n - i) for i in range(0, n, batch)]
            t0 = time.perf_counter()
            await asyncio.gather(*(one(c) for c in counts))
            return time.perf_counter() - t0

        return n * len(body) / run_sync(run()) / 1e6
    finally:
        producer.shutdown()


def consume_mb_s(namesrv: str, topic: str, n: int, size: int) -> float:
    """Pull every message of the topic's one queue from its start, 1024 at a time with two pulls in flight
    (``PullConsumer.pull_ahead``: the broker reads the next batch while this one is decoded)."""
    consumer = PullConsumer(f"scale-c{time.monotonic_ns()}", namesrv).start()
    try:
        mq = consumer.fetch_queues(topic)[0]
        got = 0
        t0 = time.perf_counter()
        for res in consumer.pull_ahead(mq, consumer.min_offset(mq), 1024, in_flight=2):
            got += len(res.messages)
            if got >= n:
                break
        return got * size / (time.perf_counter() - t0) / 1e6
    finally:
        consumer.shutdown()


# ---------------------------------------------------------------------------------------------------- depth
def commitlog_read_mb_s(store: Path) -> float:
    """The CommitLog segments' bytes read in order, 1 MiB at a time, cold (page cache dropped where allowed, else
    each file advised out; the broker stopped first, as pages it maps are not dropped): the rate a plain
    sequential read of the very bytes the consumer caught up gets, right after it (the 512 MiB probe above is one
    fresh file; on a virtual disk a deep queue's segments can read several times slower than that). Stops at the
    first all-zero MiB: the unwritten end of the last segment."""
    size, elapsed, zeros = 0, 0.0, bytes(MiB)
    cold = drop_caches()
    for path in sorted((store / "commitlog").iterdir()):
        fd = os.open(path, os.O_RDONLY)
        try:
            if not cold:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            t0 = time.perf_counter()
            while (chunk := os.read(fd, MiB)) and chunk != zeros[:len(chunk)]:
                size += len(chunk)
            elapsed += time.perf_counter() - t0
            if chunk:  # the written part ended in this segment
                break
        finally:
            os.close(fd)
    return size / elapsed / 1e6 if elapsed else 0.0


def depth_curve(depths: list[int], size: int = 1024) -> list[Row]:
    from bench.broker import ours_produce_batched

    rows: list[Row] = []
    for depth in depths:
        tmp = Path(tempfile.mkdtemp(prefix="bench-scale-depth-"))
        node = Node(tmp)
        client = RemotingClient()
        try:
            topic = "ScaleDepth"
            create_topics(client, node.addr, [topic], 1)
            ours_produce_batched(node.namesrv, topic, depth, os.urandom(size), batch=256)
            node.stop_broker()  # a new process maps the segments afresh: its reads are the disk's
            _, probe = disk_write_mb_s(tmp, 512 * MiB)
            read_rate, cold = disk_read_mb_s(probe)
            probe.unlink()
            cold = drop_caches() and cold
            node.start_broker()
            c0 = cpu_s(node.pid)
            t0 = time.perf_counter()
            mb_s = consume_mb_s(node.namesrv, topic, depth, size)
            wall = time.perf_counter() - t0
            cpu_pct = (cpu_s(node.pid) - c0) / wall * 100
            node.stop_broker()  # its mapped pages would stay in the page cache through drop_caches
            row: Row = {"messages": depth, "catchup_mb_s": mb_s, "broker_cpu_pct": cpu_pct,
                        "disk_read_mb_s": read_rate, "commitlog_read_mb_s": commitlog_read_mb_s(node.store),
                        "cold": cold}
            rows.append(row)
            print(f"  depth {depth}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()), flush=True)
        finally:
            node.close()
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


# ---------------------------------------------------------------------------------------------------- report
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


@dataclass
class Target:
    figure: str
    value: float
    target: str
    ratio: float  # value / limit, or measured / reference; <= 1 is within for "under" targets
    ok: bool | None  # None: shown for information, not a target


@dataclass
class Report:
    curves: dict[str, list[Row]] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)


def judge(report: Report) -> None:
    t = report.curves.get("topics") or []
    if t:
        first, last = t[0], t[-1]
        r = last["send_p99_ms"] / first["send_p99_ms"]
        report.targets.append(Target(f"send p99 at {last['topics']:,} topics vs {first['topics']:,}",
                                     last["send_p99_ms"], "<= 1.5x", r, r <= 1.5))
        worst = max(row["rss_b_per_queue"] for row in t if row["topics"] >= 1000) if last["topics"] >= 1000 else 0
        report.targets.append(Target("broker RSS per idle queue (B)", worst, "< 8 KiB", worst / 8192, worst < 8192))
        reg = last["reg_build_ms"] + last["reg_ms"]
        report.targets.append(Target(f"registration of {last['topics']:,} topics: build + round trip (ms)", reg,
                                     "< 2000 ms", reg / 2000, reg < 2000))
        if len(t) > 1:
            step = last["topics"] - t[-2]["topics"]
            report.targets.append(Target(f"creating {step:,} topics up to {last['topics']:,} (code 18, s)",
                                         last["create_s"], "< 2 s", last["create_s"] / 2, last["create_s"] < 2))
        hb = max(row["hb_bytes"] for row in t)
        report.targets.append(Target("unchanged heartbeat (bytes)", hb, "< 10 KiB", hb / 10240, hb < 10240))
    g = report.curves.get("groups") or []
    if len(g) > 1:
        first, last = g[0], g[-1]
        for key, what in (("rest_p99_ms", "REST group list"), ("page_p99_ms", "group list page")):
            r = last[key] / first[key]
            report.targets.append(Target(f"{what} p99 at {last['groups']:,} groups vs {first['groups']:,}",
                                         last[key], "<= 2x", r, r <= 2))
    c = report.curves.get("connections") or []
    if c:
        first, last = c[0], c[-1]
        report.targets.append(Target(f"idle CPU at {last['connections']:,} connections (%)", last["idle_cpu_pct"],
                                     "< 5 %", last["idle_cpu_pct"] / 5, last["idle_cpu_pct"] < 5))
        r = last["send_p99_ms"] / first["send_p99_ms"]
        report.targets.append(Target(f"send p99 at {last['connections']:,} vs {first['connections']:,} connections",
                                     last["send_p99_ms"], "<= 2x", r, r <= 2))
    s = report.curves.get("size") or []
    for row in s:
        if row["size_b"] >= 256 * 1024:
            r = row["produce_mb_s"] / row["disk_write_mb_s"]
            report.targets.append(Target(f"produce MB/s at {row['size_b']:,} B vs disk write", row["produce_mb_s"],
                                         ">= 0.5x", r, r >= 0.5))
    for row in report.curves.get("depth") or []:
        # the disk's rate for this much data: the same CommitLog read cold, 1 MiB at a time (a 512 MiB probe file
        # just written can be served by the host's cache under a VM, overstating a 10 GiB read); older result
        # files without that figure fall back to the probe
        disk = row.get("commitlog_read_mb_s") or row["disk_read_mb_s"]
        what = "CommitLog read" if row.get("commitlog_read_mb_s") else "disk read"
        r = row["catchup_mb_s"] / disk
        report.targets.append(Target(f"catch-up MB/s of {row['messages']:,} ({'cold' if row['cold'] else 'warm'}) "
                                     f"vs {what}", row["catchup_mb_s"], ">= 0.5x", r, r >= 0.5))
        r = row["catchup_mb_s"] / row["disk_read_mb_s"]
        report.targets.append(Target(f"catch-up MB/s of {row['messages']:,} vs the 512 MiB probe read",
                                     row["catchup_mb_s"], "-", r, None))


def print_report(report: Report) -> None:
    for name, rows in report.curves.items():
        if not rows:
            continue
        keys = list(rows[0])
        print(f"\n{name}")
        print("  " + " ".join(f"{k:>16}" for k in keys))
        for row in rows:
            print("  " + " ".join(f"{_fmt(row.get(k, '')):>16}" for k in keys))
    if report.targets:
        print(f"\n{'figure':<58} {'value':>10} {'target':>10} {'ratio':>7}  verdict")
        for t in report.targets:
            verdict = "info" if t.ok is None else "ok" if t.ok else "MISSED"
            print(f"{t.figure:<58} {_fmt(t.value):>10} {t.target:>10} {t.ratio:>7.2f}  {verdict}")


CHARTS: dict[str, tuple[str, list[str], str, bool]] = {
    # curve: (x key, y keys, title, log x)
    "topics": ("topics", ["send_p99_ms", "route_p99_ms", "rest_p99_ms", "page_p99_ms", "reg_ms"],
               "Topics (8 queues each): latency (ms)", True),
    "groups": ("groups", ["rest_p99_ms", "search_p99_ms", "page_p99_ms"], "Consumer groups: console list p99 (ms)",
               True),
    "connections": ("connections", ["send_p99_ms", "idle_cpu_pct", "rebalance_ms", "broker_rss_mib"],
                    "Client connections", True),
    "size": ("size_b", ["produce_mb_s", "consume_mb_s", "redis_produce_mb_s", "redis_consume_mb_s",
                        "disk_write_mb_s"], "Message size: MB/s", True),
    "depth": ("messages", ["catchup_mb_s", "disk_read_mb_s", "broker_cpu_pct"], "Queue depth: cold catch-up", True),
}


def write_charts(report: Report, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, rows in report.curves.items():
        if not rows:
            continue
        x_key, y_keys, title, logx = CHARTS[name]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        xs = [row[x_key] for row in rows]
        for key in y_keys:
            if key in rows[0]:
                ax.plot(xs, [row[key] for row in rows], marker="o", label=key)
        if logx and len(xs) > 1:
            ax.set_xscale("log")
        values = [row[k] for row in rows for k in y_keys if k in row and isinstance(row[k], int | float)
                  and row[k] > 0]
        if values and max(values) / min(values) > 100:  # figures of several magnitudes on one chart
            ax.set_yscale("log")
        ax.set_xlabel(x_key)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"scale-{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    (out / "scale.json").write_text(json.dumps({"curves": report.curves,
                                                "targets": [t.__dict__ for t in report.targets]}, indent=1))
    return written


# ---------------------------------------------------------------------------------------------------- main
def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n\n")[0],
        epilog="Curves and what each point measures: see the module docstring (bench/scale.py). Example: "
               "python -m bench.scale --curves topics --topics 10,1000,10000,50000",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--curves", default="topics,groups,connections,size,depth",
                        help="comma-separated: topics, groups, connections, size, depth")
    parser.add_argument("--topics", default="10,1000,10000,50000", help="topic counts of the topics curve")
    parser.add_argument("--queues", type=int, default=8, help="queues per topic")
    parser.add_argument("--groups", default="100,1000,10000",
                        help="subscription groups of the groups curve (from one full list page, 100)")
    parser.add_argument("--console-rounds", type=int, default=100,
                        help="timed requests per console p99 (topics and groups curves)")
    parser.add_argument("--connections", default="1,100,1000,5000", help="client connections of that curve")
    parser.add_argument("--heartbeat-s", type=float, default=30.0,
                        help="clients' heartbeat period, also the idle CPU window")
    parser.add_argument("--sizes", default="100,1024,16384,262144,4194304", help="message sizes in bytes")
    parser.add_argument("--size-budget-mib", type=int, default=256, help="bytes produced per size point")
    parser.add_argument("--depth", default="10000000", help="messages (1 KiB) a consumer catches up, cold")
    parser.add_argument("--sends", type=int, default=2000, help="timed sends per send-p99 figure")
    parser.add_argument("--routes", type=int, default=2000, help="GET_ROUTEINFO_BY_TOPIC requests per point")
    parser.add_argument("--send-topics", type=int, default=1000,
                        help="random topics the send p99 is spread over (each gets one send per queue first)")
    parser.add_argument("--console", action=argparse.BooleanOptionalAction, default=True,
                        help="time the console's topic list (REST and page) on the topics curve")
    parser.add_argument("--quick", action="store_true",
                        help="small points: topics 10,1000; connections 1,100; sizes 100,16384,262144; depth "
                             "100000; 10 s heartbeats; 500 sends; 64 MiB per size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="where the PNGs go")
    parser.add_argument("--replot", type=Path, metavar="SCALE_JSON",
                        help="measure nothing: the table and charts again from a run's scale.json")
    args = parser.parse_args(argv)
    if args.replot is not None:
        report = Report(curves=json.loads(args.replot.read_text())["curves"])
        judge(report)
        print_report(report)
        for path in write_charts(report, args.out):
            print(f"chart: {path}")
        return 0
    if args.quick:
        args.topics, args.connections, args.sizes, args.depth = "10,1000", "1,100", "100,16384,262144", "100000"
        args.groups = "100,1000"
        args.heartbeat_s, args.sends, args.routes, args.size_budget_mib = 10.0, 500, 500, 64
    curves = [c.strip() for c in args.curves.split(",") if c.strip()]
    unknown = set(curves) - set(CHARTS)
    if unknown:
        parser.error(f"unknown curves: {', '.join(sorted(unknown))}")
    print("note: CPU-bound figures are noisy on a shared machine; compare ratios from the same run", flush=True)
    report = Report()
    if "topics" in curves:
        print("topics curve", flush=True)
        report.curves["topics"] = topics_curve(_ints(args.topics), args.queues, args.console, args.sends,
                                               args.routes, args.send_topics, args.console_rounds)
    if "groups" in curves:
        print("groups curve", flush=True)
        report.curves["groups"] = groups_curve(_ints(args.groups), args.console_rounds)
    if "connections" in curves:
        print("connections curve", flush=True)
        report.curves["connections"] = connections_curve(_ints(args.connections), args.heartbeat_s, args.sends)
    if "size" in curves:
        print("message size curve", flush=True)
        report.curves["size"] = size_curve(_ints(args.sizes), args.size_budget_mib * MiB)
    if "depth" in curves:
        print("queue depth curve", flush=True)
        report.curves["depth"] = depth_curve(_ints(args.depth))
    judge(report)
    print_report(report)
    for path in write_charts(report, args.out):
        print(f"chart: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
