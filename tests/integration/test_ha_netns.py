"""Separate hosts (issue 16, must show): name server, master, slave and a client each run in a network namespace
this test creates, joined by veth pairs to a bridge in a fifth namespace, with 10.200.77.x addresses that exist
only inside them (no traffic leaves the machine). The client sees the cluster only through the name server.
Cutting the master-slave link (a blackhole route in the slave's namespace) makes SYNC_MASTER sends answer
FLUSH_SLAVE_TIMEOUT; when the link returns, sends succeed again, and every acknowledged message can be consumed.
Skipped, with the reason, where namespaces cannot be made (not root, no ``ip``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.netns_hosts import bridged_hosts
from tests.integration.netns_hosts import ip as run_ip

NET = "10.200.77"
HOSTS = {"ns": 1, "ma": 2, "sl": 3, "cl": 4}  # name server, master, slave, client
PORT = 10911  # fixed ports are safe: each namespace has its own port space

CLIENT = r'''
import json, sys, time
from broker_core.client import ClientError, Message, Producer, PullConsumer
namesrv, cmd, topic = sys.argv[1], sys.argv[2], sys.argv[3]
out = {"statuses": [], "acked": [], "bodies": []}
if cmd == "send":
    with Producer("netns-producer", namesrv, send_timeout=10.0) as p:
        deadline = time.monotonic() + float(sys.argv[6])
        for i in range(int(sys.argv[5])):
            while True:
                body = "%s-%d-%f" % (sys.argv[4], i, time.time())
                try:
                    r = p.send(Message(topic, body.encode()))
                except ClientError as exc:
                    out["statuses"].append("error:%s" % exc.code)
                    r = None
                if r is not None:
                    out["statuses"].append(r.status.name)
                    if r.status.name == "SEND_OK":
                        out["acked"].append(body)
                if sys.argv[7] == "once" or (r is not None and r.status.name == "SEND_OK") \
                        or time.monotonic() > deadline:
                    break
elif cmd == "consume":
    c = PullConsumer("netns-reader", namesrv).start()
    for mq in c.fetch_queues(topic):
        offset = 0
        while True:
            res = c.pull(mq, offset, 256)
            if not res.messages:
                break
            out["bodies"] += [m.body.decode() for m in res.messages]
            offset = res.next_begin_offset
    c.shutdown()
print(json.dumps(out))
'''


@pytest.fixture
def netns() -> Iterator[dict[str, str]]:
    with bridged_hosts("ha", NET, HOSTS) as names:
        yield names


def _start(ns: str, args: list[str], log: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=open(log, "ab"))
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"{args} did not start in {ns}: {line!r}: {log.read_text()[-2000:]}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    return proc


def _client(ns: str, *args: str) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", CLIENT, f"{NET}.1:{PORT}", *args],
                          cwd=ROOT, env=env, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: dict[str, list[str]] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def test_hosts_in_namespaces_link_cut_and_recovery(netns: dict[str, str], tmp_path: Path) -> None:
    procs = []
    topic = "TopicNetns"
    try:
        procs.append(_start(netns["ns"], ["-m", "broker_core.namesrv", "--listen", f"{NET}.1:{PORT}"],
                            tmp_path / "namesrv.log"))
        for host, role, bid in (("ma", "SYNC_MASTER", 0), ("sl", "SLAVE", 1)):
            ip = f"{NET}.{HOSTS[host]}"
            conf = tmp_path / f"{host}.conf"
            conf.write_text(f"brokerName=broker-ns\nbrokerId={bid}\nbrokerRole={role}\nbrokerIP1={ip}\n"
                            "mapedFileSizeCommitLog=4194304\nmaxHashSlotNum=10000\nmaxIndexNum=40000\n"
                            "registerNameServerPeriod=1000\nslaveSynchronizeInterval=1000\n"
                            f"defaultTopicQueueNums=2\n")
            procs.append(_start(netns[host], ["-m", "broker_core", "--store-dir", str(tmp_path / host),
                                              "--listen", f"{ip}:{PORT}", "--namesrv", f"{NET}.1:{PORT}",
                                              "--config", str(conf)], tmp_path / f"{host}.log"))
        acked: list[str] = []
        # until the slave is connected SYNC_MASTER answers SLAVE_NOT_AVAILABLE: send until one is acknowledged
        first = _client(netns["cl"], "send", topic, "warmup", "1", "60", "until-ok")
        assert first["statuses"][-1] == "SEND_OK", first
        acked += first["acked"]
        normal = _client(netns["cl"], "send", topic, "normal", "30", "30", "once")
        assert set(normal["statuses"]) == {"SEND_OK"}, normal
        acked += normal["acked"]
        # cut the link: the slave cannot reach the master (its packets to it vanish)
        run_ip("-n", netns["sl"], "route", "add", "blackhole", f"{NET}.{HOSTS['ma']}/32")
        cut = _client(netns["cl"], "send", topic, "cut", "2", "30", "once")
        assert cut["statuses"] and set(cut["statuses"]) <= {"FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"}, cut
        assert cut["statuses"][0] == "FLUSH_SLAVE_TIMEOUT", cut  # the connection is up, no ack comes
        run_ip("-n", netns["sl"], "route", "del", "blackhole", f"{NET}.{HOSTS['ma']}/32")
        back = _client(netns["cl"], "send", topic, "back", "1", "120", "until-ok")
        assert back["statuses"][-1] == "SEND_OK", back
        acked += back["acked"]
        after = _client(netns["cl"], "send", topic, "after", "20", "30", "once")
        assert set(after["statuses"]) == {"SEND_OK"}, after
        acked += after["acked"]
        got = _client(netns["cl"], "consume", topic)
        assert set(acked) <= set(got["bodies"])
        # the messages sent during the cut were stored by the master (not acknowledged as replicated)
        assert {b for b in got["bodies"] if b.startswith("cut-")}
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
