"""REST API benchmark (issue 5's targets): the console's ``/api/v1/`` served by Django in front of a real name
server and broker, driven over HTTP from this process. ``PYTHONPATH=. .venv/bin/python -m bench.rest --help``.

Setup (not timed): a temp dir holding a name server + one broker (subprocesses, ASYNC_FLUSH, store in the temp
dir), a fresh SQLite database (``DJANGO_DB_PATH`` + ``manage.py migrate``), a superuser and its DRF token, and
``manage.py runserver --noreload --insecure 127.0.0.1:<free port>`` with ``BROKER_CORE_NAMESRV`` pointing at the
name server. runserver is Django's threaded development server (one thread per connection, no worker
processes); ``--server gunicorn`` serves the same application with gunicorn's gthread workers (``--workers`` x
``--server-threads``), as ``make run`` does. Every request is authenticated with
``Authorization: Token <key>``; produce requests are written to the audit log, as in production.

Connections: ``--connection keep-alive`` (default) gives each client thread one persistent ``requests`` session;
``--connection close`` opens a new TCP connection per request. A probe before the rows prints ``GET /healthz``
on both. runserver does not set TCP_NODELAY and sends a reply's headers and body in separate ``send()`` calls,
so on a reused connection every reply waits ~40 ms for the client's delayed ACK (Nagle); a new connection per
request avoids that stall (and pays a TCP handshake instead), showing what the application itself costs.

Rows (timed with ``time.perf_counter``):

1. ``rest_produce_batched``: ``POST /api/v1/topics/T/messages/`` with ``--batch`` (100) messages per request,
   ``--body-size`` (1024) byte UTF-8 text bodies, ``--threads`` (4) client threads; msg/s = messages / wall time
   from the first request to the last reply. Target >= 20,000 msg/s.
2. ``rest_produce_single``: the same endpoint with one message per request; requests/s. Target >= 1,000 req/s.
3. ``rest_lookup_by_key``: ``GET /api/v1/messages/?topic=T&key=K`` for random keys among ``--index-messages``
   (1,000,000) messages that each carry a unique key, filled beforehand through the SDK (``Producer.send_batch``
   of 256, not through REST, not timed) and indexed by the broker; one client thread, one request at a time,
   every reply checked to hold exactly the message with that key; p50/p99 latency. Target p99 < 50 ms.

A few warm-up requests precede each row and are not counted. Every reply's status is checked; a row with
failed requests says so. Everything runs on 127.0.0.1, and the subprocesses and the temp dir are removed at
the end (also on errors and Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import requests

from broker_core.client import AdminClient, Message, Producer

ROOT = Path(__file__).resolve().parent.parent

TOKEN_SCRIPT = """
import secrets
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user = get_user_model().objects.create_superuser("bench", "", secrets.token_urlsafe(16))
print("TOKEN=" + Token.objects.create(user=user).key)
"""


class BenchSession(requests.Session):
    """A ``requests`` session; with ``close_each`` every request goes over a new TCP connection (sent with
    ``Connection: close``, and the pool is dropped after the reply, since runserver's reply does not say close)."""

    close_each = False

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        resp = super().request(*args, **kwargs)
        if self.close_each:
            self.close()
        return resp


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """Name server, broker and the Django console as subprocesses, everything under one temp dir."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-rest-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_DB_PATH": str(self.tmp / "console.sqlite3")}
        self.env.pop("DATABASE_URL", None)  # always the fresh SQLite database
        self.namesrv = ""
        self.url = ""
        self.token = ""

    # ------------------------------------------------------------------ broker side
    def _start_ready(self, args: list[str]) -> int:
        """Start a process that prints ``READY port=<port>`` when it listens; return the port."""
        proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("READY port="):
            raise RuntimeError(f"{args} did not start: {line!r}")
        return int(line.strip().split("=")[1])

    def start_broker(self) -> None:
        ns_port = self._start_ready([sys.executable, "-m", "broker_core.namesrv", "--listen", "127.0.0.1:0"])
        self.namesrv = f"127.0.0.1:{ns_port}"
        self._start_ready([sys.executable, "-m", "broker_core", "--store-dir", str(self.tmp / "store"),
                           "--listen", "127.0.0.1:0", "--namesrv", self.namesrv, "--log-level", "WARNING"])
        self.env["BROKER_CORE_NAMESRV"] = self.namesrv

    # ------------------------------------------------------------------ console side
    def _manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              timeout=300, check=False)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args[:1])} failed:\n{done.stderr.decode(errors='replace')}")
        return done.stdout.decode()

    server = "runserver"
    workers = 4
    threads = 8

    def start_console(self, timeout: float = 60.0) -> None:
        self._manage("migrate", "--noinput")
        out = self._manage("shell", "-c", TOKEN_SCRIPT)
        self.token = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("TOKEN="))
        port = free_port()
        log = open(self.tmp / "runserver.log", "wb")
        self.logs.append(log)
        if self.server == "gunicorn":  # as the Procfile's web line runs it
            cmd = [sys.executable, "-m", "gunicorn", "console.wsgi:application", "--bind", f"127.0.0.1:{port}",
                   "--workers", str(self.workers), "--worker-class", "gthread", "--threads", str(self.threads)]
        else:
            cmd = [sys.executable, "manage.py", "runserver", "--noreload", "--insecure", f"127.0.0.1:{port}"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=log)
        self.procs.append(proc)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"runserver exited with {proc.returncode}:\n{self.server_log()}")
            try:
                if requests.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"/healthz did not answer 200 within {timeout:.0f} s:\n{self.server_log()}")

    def server_log(self, tail: int = 1500) -> str:
        path = self.tmp / "runserver.log"
        return path.read_bytes()[-tail:].decode(errors="replace") if path.exists() else ""

    def session(self, close: bool = False) -> requests.Session:
        """An authenticated session; ``close``: a new TCP connection per request (``Connection: close``)."""
        s = BenchSession()
        s.close_each = close
        s.headers.update({"Authorization": f"Token {self.token}", "Content-Type": "application/json"})
        if close:
            s.headers["Connection"] = "close"
        return s

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for log in self.logs:
            log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------- workloads
def text_body(size: int, rng: random.Random) -> str:
    """``size`` bytes of printable ASCII (valid UTF-8, nothing JSON needs to escape)."""
    return "".join(rng.choices(string.ascii_letters + string.digits, k=size))


def nearest_rank(sorted_values: list[float], q: float) -> float:
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def run_threads(threads: int, requests_per_thread: int,
                make_call: Callable[[], Callable[[], bool]]) -> tuple[float, int]:
    """Run ``requests_per_thread`` calls on each of ``threads`` threads (each with its own call, i.e. its own
    session), all released together; return (wall seconds, failed calls)."""
    calls = [make_call() for _ in range(threads)]
    start = threading.Barrier(threads + 1)
    failures = [0] * threads
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            start.wait()
            for _ in range(requests_per_thread):
                if not calls[i]():
                    failures[i] += 1
        except BaseException as exc:  # noqa: BLE001 -- reported after the join
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"a client thread failed: {errors[0]!r}") from errors[0]
    return dt, sum(failures)


def probe(stack: Stack, rounds: int = 20) -> tuple[float, float]:
    """p50 ms of ``GET /healthz`` on one keep-alive connection and on a new connection per request."""
    out = []
    for close in (False, True):
        session = stack.session(close)
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            session.get(stack.url + "/healthz", timeout=30).raise_for_status()
            samples.append((time.perf_counter() - t0) * 1000)
        out.append(nearest_rank(sorted(samples), 0.5))
    return out[0], out[1]


def rest_produce(stack: Stack, topic: str, per_request: int, requests_per_thread: int, threads: int, body: str,
                 warmup: int, close: bool) -> dict[str, float]:
    """POST ``per_request`` messages per request from ``threads`` keep-alive sessions."""
    payload = json.dumps({"messages": [{"body": body, "body_encoding": "utf-8"}] * per_request}).encode()
    url = f"{stack.url}/api/v1/topics/{topic}/messages/"
    first_error: list[str] = []

    def make_call() -> Callable[[], bool]:
        session = stack.session(close)

        def call() -> bool:
            resp = session.post(url, data=payload, timeout=60)
            if resp.status_code == 201 and len(resp.json()["results"]) == per_request:
                return True
            if not first_error:
                first_error.append(f"{resp.status_code} {resp.text[:300]}")
            return False

        for _ in range(warmup):  # connection, route, producer; not timed
            call()
        return call

    dt, failed = run_threads(threads, requests_per_thread, make_call)
    n_req = threads * requests_per_thread
    if first_error:
        print(f"  first failed request: {first_error[0]}", flush=True)
    return {"seconds": dt, "requests": n_req, "failed": failed, "req_per_s": n_req / dt,
            "msg_per_s": (n_req - failed) * per_request / dt}


def fill_indexed(namesrv: str, topic: str, n: int, body: bytes, batch: int = 256) -> float:
    """``n`` messages with unique keys ``k<i>`` through the SDK in batches of ``batch``; seconds taken until the
    broker's index answers for the last key."""
    producer = Producer("bench-rest-fill", namesrv).start()
    admin = AdminClient(namesrv).start()
    try:
        t0 = time.perf_counter()
        next_report = t0 + 10
        for i in range(0, n, batch):
            producer.send_batch([Message(topic, body, keys=f"k{j}") for j in range(i, min(n, i + batch))])
            if time.perf_counter() > next_report:
                print(f"  ... {i + batch:,} / {n:,} sent", flush=True)
                next_report += 10
        deadline = time.monotonic() + 300
        while not admin.query_message(topic, f"k{n - 1}", max_num=1)[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"key k{n - 1} not indexed 300 s after the fill")
            time.sleep(0.05)
        return time.perf_counter() - t0
    finally:
        producer.shutdown()
        admin.shutdown()


def rest_lookup(stack: Stack, topic: str, n_indexed: int, lookups: int, warmup: int, seed: int,
                close: bool) -> dict[str, float]:
    """Single-threaded ``GET /messages/?topic=&key=`` for random keys; latency per request."""
    rng = random.Random(seed)
    session = stack.session(close)
    url = f"{stack.url}/api/v1/messages/"
    samples: list[float] = []
    wrong = 0
    first_error = ""
    for i in range(warmup + lookups):
        key = f"k{rng.randrange(n_indexed)}"
        t0 = time.perf_counter()
        resp = session.get(url, params={"topic": topic, "key": key}, timeout=60)
        dt = time.perf_counter() - t0
        ok = resp.status_code == 200
        if ok:
            results = resp.json()["results"]
            ok = len(results) == 1 and key in (results[0]["keys"] or [])
        if i < warmup:
            continue
        samples.append(dt * 1000)
        if not ok:
            wrong += 1
            first_error = first_error or f"{resp.status_code} {resp.text[:300]}"
    if first_error:
        print(f"  first failed lookup: {first_error}", flush=True)
    samples.sort()
    return {"p50_ms": nearest_rank(samples, 0.50), "p99_ms": nearest_rank(samples, 0.99),
            "max_ms": samples[-1], "mean_ms": sum(samples) / len(samples), "lookups": len(samples), "failed": wrong}


# --------------------------------------------------------------------------------------------------------- main
def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body-size", type=int, default=1024, help="message body bytes, UTF-8 text (1024)")
    parser.add_argument("--threads", type=int, default=4, help="client threads of the throughput rows (4)")
    parser.add_argument("--batch", type=int, default=100, help="messages per request of row 1 (100)")
    parser.add_argument("--batch-requests", type=int, default=100,
                        help="row 1: requests per client thread (100, i.e. 40,000 messages with 4 threads)")
    parser.add_argument("--single-requests", type=int, default=1000,
                        help="row 2: requests per client thread (1000)")
    parser.add_argument("--index-messages", type=int, default=1_000_000,
                        help="row 3: messages with unique keys in the looked-up topic (1000000)")
    parser.add_argument("--lookups", type=int, default=2000, help="row 3: timed lookups (2000)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests per client before each row (5)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of bodies and looked-up keys (1)")
    parser.add_argument("--connection", choices=("keep-alive", "close"), default="keep-alive",
                        help="keep-alive: one persistent connection per client thread (default); close: a new TCP "
                             "connection per request (sidesteps runserver's Nagle/delayed-ACK stall, see the probe)")
    parser.add_argument("--server", choices=("runserver", "gunicorn"), default="runserver",
                        help="runserver (Django's threaded development server) or gunicorn (gthread workers, as "
                             "`make run` serves the console)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes (4)")
    parser.add_argument("--server-threads", type=int, default=8, help="threads per gunicorn worker (8)")
    parser.add_argument("--skip", choices=("batched", "single", "lookup"), action="append", default=[],
                        help="leave a row out (repeatable)")
    args = parser.parse_args(argv)
    if min(args.body_size, args.threads, args.batch, args.batch_requests, args.single_requests, args.index_messages,
           args.lookups) < 1 or args.warmup < 0:
        parser.error("sizes and counts must be >= 1 (warmup >= 0)")
    rng = random.Random(args.seed)
    body = text_body(args.body_size, rng)
    print(f"# bench.rest: {args.body_size} B UTF-8 bodies, {args.threads} client threads, Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs")
    if args.server == "gunicorn":
        print(f"# server: gunicorn, {args.workers} worker processes x {args.server_threads} threads (gthread); "
              "client, console, broker and name server share this machine", flush=True)
    else:
        print("# server: Django's threaded development server (manage.py runserver --noreload --insecure); client, "
              "console, broker and name server share this machine", flush=True)

    stack = Stack()
    stack.server, stack.workers, stack.threads = args.server, args.workers, args.server_threads
    results: list[str] = []
    try:
        stack.start_broker()
        stack.start_console()
        print(f"# console {stack.url}, name server {stack.namesrv}, temp dir {stack.tmp}", flush=True)
        keep_ms, close_ms = probe(stack)
        print(f"# probe GET /healthz p50: {keep_ms:.1f} ms on a keep-alive connection, {close_ms:.1f} ms on a new "
              f"connection per request; measuring with --connection {args.connection}", flush=True)
        if keep_ms > close_ms + 20:
            print("# note: runserver does not set TCP_NODELAY and writes headers and body in separate send()s, so "
                  "on a reused connection each reply waits for the client's delayed ACK (~40 ms)", flush=True)
        close = args.connection == "close"
        admin = AdminClient(stack.namesrv).start()
        for topic in ("BenchRestBatch", "BenchRestSingle", "BenchRestLookup"):
            admin.create_topic(topic, 4, 4)
        admin.shutdown()

        if "batched" not in args.skip:
            r = rest_produce(stack, "BenchRestBatch", args.batch, args.batch_requests, args.threads, body,
                             args.warmup, close)
            line = (f"1. REST produce, {args.batch} msgs/request      {r['msg_per_s']:>10,.0f} msg/s  "
                    f"({r['req_per_s']:,.1f} req/s, {r['requests']:,.0f} requests in {r['seconds']:.1f} s, "
                    f"{r['failed']:.0f} failed)  target >= 20,000 msg/s: "
                    f"{verdict(r['msg_per_s'] >= 20_000 and not r['failed'])}")
            print(line, flush=True)
            results.append(line)

        if "single" not in args.skip:
            r = rest_produce(stack, "BenchRestSingle", 1, args.single_requests, args.threads, body, args.warmup,
                             close)
            line = (f"2. REST produce, 1 msg/request         {r['req_per_s']:>10,.0f} req/s  "
                    f"({r['requests']:,.0f} requests in {r['seconds']:.1f} s, {r['failed']:.0f} failed)  "
                    f"target >= 1,000 req/s: {verdict(r['req_per_s'] >= 1_000 and not r['failed'])}")
            print(line, flush=True)
            results.append(line)

        if "lookup" not in args.skip:
            print(f"# filling BenchRestLookup with {args.index_messages:,} keyed messages (SDK send_batch of 256)",
                  flush=True)
            fill_s = fill_indexed(stack.namesrv, "BenchRestLookup", args.index_messages, body.encode())
            print(f"# filled and indexed in {fill_s:.1f} s ({args.index_messages / fill_s:,.0f} msg/s)", flush=True)
            r = rest_lookup(stack, "BenchRestLookup", args.index_messages, args.lookups, args.warmup, args.seed,
                            close)
            line = (f"3. REST lookup by key among {args.index_messages:,} msgs   p50 {r['p50_ms']:.2f} ms  p99 "
                    f"{r['p99_ms']:.2f} ms  (mean {r['mean_ms']:.2f}, max {r['max_ms']:.2f}, {r['lookups']:.0f} "
                    f"lookups, {r['failed']:.0f} failed)  target p99 < 50 ms: "
                    f"{verdict(r['p99_ms'] < 50 and not r['failed'])}")
            print(line, flush=True)
            results.append(line)
    except BaseException:
        log = stack.server_log()
        if log:
            print(f"# runserver log tail:\n{log}", file=sys.stderr)
        raise
    finally:
        stack.close()
    print("\n# summary")
    for line in results:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
