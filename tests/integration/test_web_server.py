"""The web process as ``make run`` starts it: the Procfile's ``web:`` line, run by bash as honcho runs it, serves the
console's WSGI application against a real name server and broker. Checked: ``/healthz``, the login page and a static
file, an authenticated single-message REST produce (201, then the message read back through the broker by its key),
150 produce requests over six keep-alive connections at once, all stored, and a clean exit on SIGTERM. Both
Procfiles must name the same web command."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient
from tests.conftest import ROOT
from tests.integration.cluster import Cluster, free_port, wait_until

pytestmark = pytest.mark.integration

TOKEN_SCRIPT = """
from django.contrib.auth import get_user_model
from console.services.tokens import issue
user = get_user_model().objects.create_superuser("web", "", "web-password-0123456789")
print("TOKEN=" + issue(user)[1])
"""


def web_line(procfile: Path) -> str:
    return next(line.split(":", 1)[1].strip() for line in procfile.read_text().splitlines()
                if line.startswith("web:"))


def test_both_procfiles_serve_the_console_the_same_way() -> None:
    assert web_line(ROOT / "Procfile") == web_line(ROOT / "Procfile.ha")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("web-server"))
    try:
        c.add_broker("broker-a")
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def web(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """The Procfile's web command on a free port, on a fresh SQLite database; yields (port, API token)."""
    tmp = tmp_path_factory.mktemp("web-db")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_DB_PATH": str(tmp / "console.sqlite3"),
           "DJANGO_SECRET_KEY_FILE": str(tmp / "secret_key"), "BROKER_CORE_NAMESRV": cluster.namesrv,
           "CONSOLE_API_THROTTLE_USER": "off", "CONSOLE_API_THROTTLE_ANON": "off",
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env.pop("DATABASE_URL", None)
    for args in (["ensure_secret_key"], ["migrate", "--noinput"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True)
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", TOKEN_SCRIPT], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    token = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("TOKEN="))
    port = free_port()
    log = open(tmp / "web.log", "wb")  # closed below, after the process
    proc = subprocess.Popen(["bash", "-c", "exec " + web_line(ROOT / "Procfile")], cwd=ROOT,
                            env={**env, "WEB_PORT": str(port)}, stdout=log, stderr=subprocess.STDOUT)
    try:
        def healthy() -> bool:
            assert proc.poll() is None, (tmp / "web.log").read_text(errors="replace")[-2000:]
            try:
                return get(port, "/healthz")[0] == 200
            except OSError:
                return False
        wait_until(healthy, timeout=60, what="the web process to answer /healthz")
        yield port, token
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) in (0, -signal.SIGTERM), (tmp / "web.log").read_text(errors="replace")
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def produce(conn: http.client.HTTPConnection, token: str, topic: str, key: str) -> dict[str, object]:
    body = json.dumps({"messages": [{"body": f"body of {key}", "keys": [key]}]})
    conn.request("POST", f"/api/v1/topics/{topic}/messages/", body=body,
                 headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    assert resp.status == 201, data[:500]
    result = json.loads(data)
    assert isinstance(result, dict)
    return result


def test_the_web_command_serves_the_console(web: tuple[int, str], admin: AdminClient) -> None:
    port, token = web
    assert get(port, "/healthz")[0] == 200
    status, body = get(port, "/login/")
    assert status == 200 and b"<form" in body
    status, css = get(port, "/static/console/console.css")  # the console's own files, through console/wsgi.py
    assert status == 200 and css == (ROOT / "static/console/console.css").read_bytes()
    admin.create_topic("WebServed", 1, 1)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        result = produce(conn, token, "WebServed", "web-key-1")
    finally:
        conn.close()
    assert len(result["results"]) == 1  # type: ignore[arg-type]
    wait_until(lambda: bool(admin.query_message("WebServed", "web-key-1")[0]), what="the key to be indexed")
    assert [m.body for m in admin.query_message("WebServed", "web-key-1")[0]] == [b"body of web-key-1"]


def test_concurrent_keep_alive_connections_are_all_served(web: tuple[int, str], admin: AdminClient) -> None:
    port, token = web
    admin.create_topic("WebConcurrent", 4, 4)
    errors: list[BaseException] = []
    done: list[int] = []

    def client(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for i in range(25):  # one connection, kept alive, one request at a time
                produce(conn, token, "WebConcurrent", f"k-{c}-{i}")
                done.append(1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(done) == 150
    assert sum(row["maxOffset"] for row in admin.topic_stats("WebConcurrent")) == 150
