"""Run a command with ``DATABASE_URL`` on a PostgreSQL server: ``python -m tests.postgres -- pytest ...``.

``make test`` runs the console and worker suites a second time this way. The server, in order of preference:

1. ``DATABASE_URL`` already names a PostgreSQL database: used as it is.
2. A private server: ``initdb`` (from ``PATH`` or Debian's ``/usr/lib/postgresql/<version>/bin``) into a temp
   dir and ``postgres`` on a free port of 127.0.0.1, trust auth, fsync off (test data only), stopped and removed
   when the command ends. Run as the ``postgres`` user when we are root (PostgreSQL refuses root). Private, so
   concurrent runs never share pytest-django's ``test_<name>`` database.
3. A server already listening on 127.0.0.1:5432 that lets ``postgres`` in without a password, with a database
   name of this run's own (``console_<pid>``, so the test database is ``test_console_<pid>``).

Where none of these can be had, it prints why and exits 0 without running the command (a skip, said plainly).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

SKIP_PREFIX = "SKIPPED (PostgreSQL):"


def find_initdb() -> str | None:
    """The newest ``initdb`` on this machine (Debian keeps it out of ``PATH``), or None."""
    found = shutil.which("initdb")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(url: str, timeout: float = 2.0) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout))):
            return True
    except psycopg.OperationalError:
        return False


@contextmanager
def private_server(initdb: str) -> Iterator[str]:
    """A throwaway PostgreSQL server from ``initdb``; yields its ``postgres://`` URL."""
    bindir = Path(initdb).parent
    as_user: dict[str, object] = {}
    root = Path(tempfile.mkdtemp(prefix="console-pg-"))
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")  # KeyError: no postgres user to run the server as
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [],
                   "env": {**os.environ, "HOME": str(root)}}
    data, log = root / "data", root / "server.log"
    try:
        subprocess.run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync",
                        "--locale=C"], check=True, capture_output=True, cwd=root, **as_user)  # type: ignore[call-overload]
        for _attempt in range(3):  # the free port may be taken between our bind and the server's
            port = _free_port()
            proc = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root),
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=200"],
                stdout=open(log, "ab"), stderr=subprocess.STDOUT, cwd=root, **as_user)  # type: ignore[call-overload]
            url = f"postgres://postgres@127.0.0.1:{port}/postgres"
            deadline = time.monotonic() + 60
            while proc.poll() is None and not _accepts(url) and time.monotonic() < deadline:
                time.sleep(0.2)
            if proc.poll() is None and _accepts(url):
                break
            proc.kill()
            proc.wait()
        else:
            raise RuntimeError(f"postgres did not start: {log.read_text()[-2000:]}")
        try:
            yield url
        finally:
            proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_url() -> Iterator[str | None]:
    """The URL the command gets (see the module docstring), or None with the reason printed."""
    given = os.environ.get("DATABASE_URL", "")
    if urlsplit(given).scheme in {"postgres", "postgresql", "pgsql"}:
        yield given
        return
    initdb = find_initdb()
    if initdb:
        with private_server(initdb) as url:
            yield url
        return
    system = "postgres://postgres@127.0.0.1:5432/postgres"
    if _accepts(system):
        yield f"postgres://postgres@127.0.0.1:5432/console_{os.getpid()}"
        return
    print(f"{SKIP_PREFIX} no initdb on this machine (install Debian's postgresql) and no server on "
          "127.0.0.1:5432 that lets postgres in; the PostgreSQL run of the console and worker suites did not run",
          flush=True)
    yield None


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: python -m tests.postgres -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    with postgres_url() as url:
        if url is None:
            return 0
        shown = urlsplit(url)
        print(f"PostgreSQL for this run: {shown.hostname}:{shown.port}{shown.path}", flush=True)
        return subprocess.run(argv, env={**os.environ, "DATABASE_URL": url}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
