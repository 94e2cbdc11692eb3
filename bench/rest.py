"""REST API benchmark (issue 5's targets): the console's ``/api/v1/`` served by Django in front of a real name
server and broker, driven over HTTP from this process (rows 1-2: from its client processes).
``PYTHONPATH=. .venv/bin/python -m bench.rest --help``.

Setup (not timed): a temp dir holding a name server + one broker (subprocesses, ASYNC_FLUSH, store in the temp
dir), a fresh SQLite database (``DJANGO_DB_PATH`` + ``manage.py migrate``), a superuser and its DRF token, and
``manage.py runserver --noreload --insecure 127.0.0.1:<free port>`` with ``BROKER_CORE_NAMESRV`` pointing at the
name server. runserver is Django's threaded development server (one thread per connection, no worker
processes); ``--server granian`` serves the same application as ``make run`` does (the Procfile's web line: granian's
Rust HTTP server, the WSGI app on ``--server-threads`` blocking threads in each of ``--workers`` processes), and
``--server gunicorn`` with gunicorn's gthread workers (``--workers`` x ``--server-threads``), the former web line.
Every request is authenticated with
``Authorization: Token <key>``; produce requests are written to the audit log, as in production.

Client: ``--client raw`` (default) is a minimal HTTP/1.1 client on plain sockets (``RawHTTP``, TCP_NODELAY): each
row's request (request line, ``Host``, ``Authorization: Token``, ``Content-Type: application/json``,
``Content-Length``, body) is encoded once and sent as is on every request (produce bodies are fixed; the server
assigns new message ids); it reads the status line, the headers up to CRLFCRLF and then exactly Content-Length
bytes (chunked bodies, and bodies ended by the server closing, are read too). In rows 1 and 2 each of the
``--threads`` connections is driven by its own process (multiprocessing, spawn), released together by a barrier,
so client connections do not share a GIL. Why: the client shares the 2 CPUs with the server it measures, and a
``requests`` call costs about 1.4 ms of client CPU per request against about 0.13 ms for the raw client (serial
single-message produce, measured once), CPU the server could not use. ``--client requests`` keeps the former
client: ``requests`` sessions in ``--threads`` threads of this process. Either client checks every reply as
before (status 201 and the number of returned results for produce; status 200 and the returned message's key
for the lookup, both from the parsed JSON) and counts the failures.

Connections: ``--connection keep-alive`` (default) gives each client one persistent connection;
``--connection close`` opens a new TCP connection per request. A probe before the rows prints ``GET /healthz``
on both. runserver does not set TCP_NODELAY and sends a reply's headers and body in separate ``send()`` calls,
so on a reused connection every reply waits ~40 ms for the client's delayed ACK (Nagle); a new connection per
request avoids that stall (and pays a TCP handshake instead), showing what the application itself costs.

Rows (timed with ``time.perf_counter``):

1. ``rest_produce_batched``: ``POST /api/v1/topics/T/messages/`` with ``--batch`` (100) messages per request,
   ``--body-size`` (1024) byte UTF-8 text bodies, ``--threads`` (4) client connections; msg/s = messages / wall time
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
import multiprocessing
import os
import random
import select
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
from queue import Empty
from typing import IO, Any

import requests

from broker_core.client import AdminClient, Message, Producer

ROOT = Path(__file__).resolve().parent.parent

TOKEN_SCRIPT = """
import secrets
from django.contrib.auth import get_user_model
from console.services.tokens import issue
user = get_user_model().objects.create_superuser("bench", "", secrets.token_urlsafe(16))
print("TOKEN=" + issue(user)[1])
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
        # a load generator is one user (and one anonymous /healthz prober) far above any sane rate
        self.env.update(CONSOLE_API_THROTTLE_USER="off", CONSOLE_API_THROTTLE_ANON="off")
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
        elif self.server == "granian":  # Rust HTTP/1.1 (hyper) in front of the same WSGI application
            cmd = [sys.executable, "-m", "granian", "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
                   "--workers", str(self.workers), "--blocking-threads", str(self.threads), "--no-ws",
                   "console.wsgi:application"]
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


# ---------------------------------------------------------------------------------------------------- raw client
class RawHTTP:
    """A minimal HTTP/1.1 client on one plain socket (TCP_NODELAY): ``request`` sends pre-encoded request bytes
    and reads one response (status line, headers up to CRLFCRLF, then exactly Content-Length body bytes, a
    chunked body, or a body delimited by the server closing). The connection is kept alive unless ``close`` is
    set (the request must then carry ``Connection: close``) or the server answers ``Connection: close``; a kept
    connection idle for over half a second is checked for a server-side close (gunicorn's keep-alive timeout is
    2 s) before it is reused."""

    def __init__(self, host: str, port: int, close: bool = False, timeout: float = 60.0) -> None:
        self.addr = (host, port)
        self.close_each = close
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.idle_since = 0.0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.buf.clear()

    def request(self, data: bytes) -> tuple[int, bytes]:
        """Send ``data`` (a whole request); return (status, body)."""
        sock = self.sock
        if sock is not None and time.monotonic() - self.idle_since > 0.5 and select.select([sock], [], [], 0)[0]:
            self.close()  # readable while idle: the server closed it (or sent something unasked)
            sock = None
        if sock is None:
            sock = socket.create_connection(self.addr, timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = sock
        sock.sendall(data)
        status, body, keep = self._read_response(sock)
        if keep and not self.close_each:
            self.idle_since = time.monotonic()
        else:
            self.close()
        return status, body

    def _fill(self, sock: socket.socket) -> None:
        chunk = sock.recv(262144)
        if not chunk:
            raise ConnectionError("the server closed the connection before the response was complete")
        self.buf += chunk

    def _line(self, sock: socket.socket) -> bytes:
        while (eol := self.buf.find(b"\r\n")) < 0:
            self._fill(sock)
        line = bytes(self.buf[:eol])
        del self.buf[:eol + 2]
        return line

    def _read_response(self, sock: socket.socket) -> tuple[int, bytes, bool]:
        buf = self.buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            self._fill(sock)
        head = buf[:end].decode("latin-1").split("\r\n")
        del buf[:end + 4]
        version, _, rest = head[0].partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise ConnectionError(f"not an HTTP/1.x status line: {head[0]!r}")
        status = int(rest[:3])
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "")
        if "chunked" in headers.get("transfer-encoding", ""):
            out = bytearray()
            while size := int(self._line(sock).split(b";", 1)[0], 16):
                while len(buf) < size + 2:
                    self._fill(sock)
                out += buf[:size]
                del buf[:size + 2]
            while self._line(sock):  # trailers, up to the empty line
                pass
            return status, bytes(out), keep
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(buf) < n:
                self._fill(sock)
            body = bytes(buf[:n])
            del buf[:n]
            return status, body, keep
        if status in (204, 304) or status < 200:
            return status, b"", keep
        while chunk := sock.recv(262144):  # no length: the body runs until the server closes
            buf += chunk
        body = bytes(buf)
        buf.clear()
        return status, body, False


def encode_request(method: str, path: str, stack_url: str, token: str, body: bytes | None = None,
                   close: bool = False) -> bytes:
    """The whole request as bytes: request line, Host, ``Authorization: Token``, JSON content headers, body."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {stack_url.split('://', 1)[-1]}", f"Authorization: Token {token}",
             "Accept: application/json"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def host_port(url: str) -> tuple[str, int]:
    host, _, port = url.split("://", 1)[-1].rpartition(":")
    return host, int(port)


def raw_produce_worker(index: int, url: str, data: bytes, per_request: int, close: bool, warmup: int, n: int,
                       barrier: Any, results: Any) -> None:
    """One client process of the raw produce rows: ``warmup`` untimed requests, the shared barrier, then ``n``
    timed requests on one connection; puts (index, t0, t1, failed, first error, exception) on ``results``.
    ``t0``/``t1`` are ``time.perf_counter()`` (CLOCK_MONOTONIC, the same clock in every process on Linux)."""
    failed, first_error, t0, t1 = 0, [""], 0.0, 0.0
    try:
        conn = RawHTTP(*host_port(url), close=close)

        def call() -> bool:
            status, body = conn.request(data)
            if status == 201 and len(json.loads(body)["results"]) == per_request:
                return True
            if not first_error[0]:
                first_error[0] = f"{status} {body[:300].decode(errors='replace')}"
            return False

        for _ in range(warmup):  # connection, route, producer; not timed
            call()
        barrier.wait(timeout=600)
        t0 = time.perf_counter()
        for _ in range(n):
            if not call():
                failed += 1
        t1 = time.perf_counter()
        conn.close()
        results.put((index, t0, t1, failed, first_error[0], None))
    except BaseException as exc:  # noqa: BLE001 -- reported by the parent
        barrier.abort()
        results.put((index, t0, t1, failed, first_error[0], repr(exc)))


def run_raw_processes(procs: int, requests_per_proc: int, url: str, data: bytes, per_request: int, close: bool,
                      warmup: int) -> tuple[float, int, str]:
    """Run ``raw_produce_worker`` in ``procs`` spawned processes released together; return (wall seconds from the
    first timed request to the last reply, failed requests, first failure's status and body)."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a parent that ran SDK threads
    barrier = ctx.Barrier(procs + 1)
    queue = ctx.Queue()
    pool = [ctx.Process(target=raw_produce_worker, daemon=True,
                        args=(i, url, data, per_request, close, warmup, requests_per_proc, barrier, queue))
            for i in range(procs)]
    for p in pool:
        p.start()
    try:
        try:
            barrier.wait(timeout=600)
        except threading.BrokenBarrierError:
            pass  # a worker failed in its warm-up; its error is on the queue
        outs = []
        while len(outs) < procs:
            try:
                outs.append(queue.get(timeout=1))
            except Empty:
                dead = [p for p in pool if p.exitcode not in (None, 0)]
                if dead and queue.empty():
                    raise RuntimeError(f"a client process exited with {dead[0].exitcode} without a result") from None
        for p in pool:
            p.join(timeout=30)
    finally:
        for p in pool:
            if p.is_alive():
                p.terminate()
    errors = [o[5] for o in outs if o[5]]
    if errors:
        raise RuntimeError(f"a client process failed: {errors[0]}")
    first_error = next((o[4] for o in sorted(outs) if o[4]), "")
    return max(o[2] for o in outs) - min(o[1] for o in outs), sum(o[3] for o in outs), first_error


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


def probe(stack: Stack, client: str, rounds: int = 20) -> tuple[float, float]:
    """p50 ms of ``GET /healthz`` on one keep-alive connection and on a new connection per request."""
    out = []
    for close in (False, True):
        samples = []
        if client == "raw":
            conn = RawHTTP(*host_port(stack.url), close=close)
            data = encode_request("GET", "/healthz", stack.url, stack.token, close=close)
            for _ in range(rounds):
                t0 = time.perf_counter()
                status, body = conn.request(data)
                samples.append((time.perf_counter() - t0) * 1000)
                if status != 200:
                    raise RuntimeError(f"GET /healthz: {status} {body[:300]!r}")
            conn.close()
        else:
            session = stack.session(close)
            for _ in range(rounds):
                t0 = time.perf_counter()
                session.get(stack.url + "/healthz", timeout=30).raise_for_status()
                samples.append((time.perf_counter() - t0) * 1000)
        out.append(nearest_rank(sorted(samples), 0.5))
    return out[0], out[1]


def rest_produce(stack: Stack, topic: str, per_request: int, requests_per_thread: int, threads: int, body: str,
                 warmup: int, close: bool, client: str) -> dict[str, float]:
    """POST ``per_request`` messages per request from ``threads`` clients (``requests`` sessions in threads, or
    raw connections in processes), each on its own connection."""
    payload = json.dumps({"messages": [{"body": body, "body_encoding": "utf-8"}] * per_request}).encode()
    url = f"{stack.url}/api/v1/topics/{topic}/messages/"
    if client == "raw":
        data = encode_request("POST", f"/api/v1/topics/{topic}/messages/", stack.url, stack.token, payload, close)
        dt, failed, error = run_raw_processes(threads, requests_per_thread, stack.url, data, per_request, close,
                                              warmup)
        n_req = threads * requests_per_thread
        if error:
            print(f"  first failed request: {error}", flush=True)
        return {"seconds": dt, "requests": n_req, "failed": failed, "req_per_s": n_req / dt,
                "msg_per_s": (n_req - failed) * per_request / dt}
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
                close: bool, client: str) -> dict[str, float]:
    """Single-threaded ``GET /messages/?topic=&key=`` for random keys; latency per request (keys are ``k<i>``,
    nothing to URL-encode)."""
    rng = random.Random(seed)
    session = stack.session(close)
    conn = RawHTTP(*host_port(stack.url), close=close)
    url = f"{stack.url}/api/v1/messages/"
    samples: list[float] = []
    wrong = 0
    first_error = ""
    for i in range(warmup + lookups):
        key = f"k{rng.randrange(n_indexed)}"
        t0 = time.perf_counter()
        if client == "raw":
            status, text = conn.request(encode_request("GET", f"/api/v1/messages/?topic={topic}&key={key}",
                                                       stack.url, stack.token, close=close))
        else:
            resp = session.get(url, params={"topic": topic, "key": key}, timeout=60)
            status, text = resp.status_code, resp.content
        dt = time.perf_counter() - t0
        ok = status == 200
        if ok:
            results = json.loads(text)["results"]
            ok = len(results) == 1 and key in (results[0]["keys"] or [])
        if i < warmup:
            continue
        samples.append(dt * 1000)
        if not ok:
            wrong += 1
            first_error = first_error or f"{status} {text[:300].decode(errors='replace')}"
    conn.close()
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
    parser.add_argument("--threads", type=int, default=4,
                        help="concurrent client connections of the throughput rows (4): threads with --client "
                             "requests, processes with --client raw")
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
    parser.add_argument("--client", choices=("raw", "requests"), default="raw",
                        help="raw: a minimal HTTP/1.1 client on plain sockets, one process per connection in the "
                             "throughput rows (default); requests: `requests` sessions in threads of this process")
    parser.add_argument("--server", choices=("runserver", "gunicorn", "granian"), default="runserver",
                        help="runserver (Django's threaded development server), granian (Rust HTTP server, WSGI on "
                             "blocking threads: what `make run` serves) or gunicorn (gthread workers)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn or granian worker processes (4)")
    parser.add_argument("--server-threads", type=int, default=8,
                        help="threads per gunicorn worker, blocking threads per granian worker (8)")
    parser.add_argument("--skip", choices=("batched", "single", "lookup"), action="append", default=[],
                        help="leave a row out (repeatable)")
    args = parser.parse_args(argv)
    if min(args.body_size, args.threads, args.batch, args.batch_requests, args.single_requests, args.index_messages,
           args.lookups) < 1 or args.warmup < 0:
        parser.error("sizes and counts must be >= 1 (warmup >= 0)")
    rng = random.Random(args.seed)
    body = text_body(args.body_size, rng)
    clients = "raw HTTP/1.1 client processes" if args.client == "raw" else "`requests` client threads"
    print(f"# bench.rest: {args.body_size} B UTF-8 bodies, {args.threads} {clients}, Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs")
    if args.server in ("gunicorn", "granian"):
        kind = "threads (gthread)" if args.server == "gunicorn" else "blocking threads (WSGI)"
        print(f"# server: {args.server}, {args.workers} worker processes x {args.server_threads} {kind}; "
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
        keep_ms, close_ms = probe(stack, args.client)
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
                             args.warmup, close, args.client)
            line = (f"1. REST produce, {args.batch} msgs/request      {r['msg_per_s']:>10,.0f} msg/s  "
                    f"({r['req_per_s']:,.1f} req/s, {r['requests']:,.0f} requests in {r['seconds']:.1f} s, "
                    f"{r['failed']:.0f} failed)  target >= 20,000 msg/s: "
                    f"{verdict(r['msg_per_s'] >= 20_000 and not r['failed'])}")
            print(line, flush=True)
            results.append(line)

        if "single" not in args.skip:
            r = rest_produce(stack, "BenchRestSingle", 1, args.single_requests, args.threads, body, args.warmup,
                             close, args.client)
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
                            close, args.client)
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
