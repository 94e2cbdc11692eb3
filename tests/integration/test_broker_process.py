"""The broker process: READY line, clean SIGTERM shutdown, one broker per store directory, --help."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from broker_core.store import MessageStore
from tests.conftest import ROOT, small_config

pytestmark = pytest.mark.integration

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def start_broker(store_dir, *extra: str) -> subprocess.Popen:  # type: ignore[no-untyped-def,type-arg]
    proc = subprocess.Popen([sys.executable, "-m", "broker_core", "--store-dir", str(store_dir), "--listen",
                             "127.0.0.1:0", *extra],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY port="), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc


def test_ready_sigterm_and_lock(tmp_path):
    store_dir = tmp_path / "store"
    broker = start_broker(store_dir)
    try:
        assert (store_dir / "abort").exists()
        second = subprocess.run([sys.executable, "-m", "broker_core", "--store-dir", str(store_dir), "--listen",
                                 "127.0.0.1:0"], cwd=ROOT,
                                env=ENV, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1
        assert "in use by another broker" in second.stderr and str(broker.pid) in second.stderr
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(timeout=30) == 0
    assert not (store_dir / "abort").exists()
    # the store opens normally afterwards
    store = MessageStore(small_config(store_dir, mapped_file_size_commit_log_bytes=1024**3), background=False)
    store.start()
    assert store.last_exit_ok
    store.shutdown()


def test_config_file_and_env(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName = broker-z\nflushDiskType = SYNC_FLUSH\nmapedFileSizeCommitLog=65536\n")
    broker = start_broker(tmp_path / "s", "--config", str(conf))
    broker.send_signal(signal.SIGTERM)
    assert broker.wait(timeout=30) == 0
    bad = subprocess.run([sys.executable, "-m", "broker_core", "--store-dir", str(tmp_path / "s2")], cwd=ROOT,
                         env={**ENV, "BROKER_CORE_FLUSH_DISK_TYPE": "NEVER"}, capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "flushDiskType" in bad.stderr


def test_help_documents_every_key():
    out = subprocess.run([sys.executable, "-m", "broker_core", "--help"], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0
    for key in ("--store-dir", "--config", "deleteWhen", "fileReservedTime", "flushDiskType",
                "diskMaxUsedSpaceRatio", "BROKER_CORE_"):
        assert key in out.stdout


def _two_free_ports_apart() -> int:
    """A port P with P, P-2 (VIP) and P+1 (HA) free now (the broker binds them right after)."""
    import socket

    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port <= 1026:
            continue
        try:
            with socket.socket() as a, socket.socket() as b, socket.socket() as c:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port - 2))
                c.bind(("127.0.0.1", port + 1))  # the HA port, listenPort + 1
            return port
        except OSError:
            continue
    raise RuntimeError("no free pair of ports")


def test_vip_port_serves_the_same_broker(tmp_path):
    """Java clients before 4.5 send to listenPort - 2 (vipChannelEnabled); a fixed listen port serves it too."""
    from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
    from broker_core.remoting.blocking import BlockingClient

    port = _two_free_ports_apart()
    proc = subprocess.Popen([sys.executable, "-m", "broker_core", "--store-dir", str(tmp_path / "store"), "--listen",
                             f"127.0.0.1:{port}"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(f"READY port={port}")
        client = BlockingClient()
        try:
            for p in (port, port - 2):
                resp = client.invoke(f"127.0.0.1:{p}", RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {
                    "topic": "Nothing", "queueId": 0}))
                assert resp.code == ResponseCode.SUCCESS and resp.header["offset"] == "0"
        finally:
            client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
