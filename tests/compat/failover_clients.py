"""Apache clients across a SIGKILL of the master in controller mode (no tests here): a controller-mode group
(``tests/integration/failover_cluster.py``: one controller, a name server, three brokers on loopback) with a topic
on every member, and a runner for a client driver's ``failover`` op (a producer and a consumer in one process,
one JSON line per event, until a stop file appears), which kills the master while the client runs and measures
the time from the kill to the client's first acknowledged send."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import wait_until
from tests.integration.failover_cluster import FailoverGroup

TOPIC = "TopicClientFailover"


def create_everywhere(group: FailoverGroup, topic: str = TOPIC, queues: int = 4,
                      subscription_group: str | None = None) -> None:
    """The topic (and a subscription group) on every member, so whichever is elected serves them at once."""
    client = BlockingClient()
    try:
        for b in group.members:
            resp = client.invoke(b.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6",
                "defaultTopic": "TBW102", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}),
                10.0)
            assert resp.code == 0, (b.addr, resp.remark)
            if subscription_group:
                body = json.dumps({"groupName": subscription_group, "consumeEnable": True,
                                   "retryMaxTimes": 16}).encode()
                resp = client.invoke(b.addr, RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body), 10.0)
                assert resp.code == 0, (b.addr, resp.remark)
    finally:
        client.close()


@dataclass
class Outcome:
    client: str
    killed_at: float
    sent: dict[str, float] = field(default_factory=dict)  # key -> when acknowledged (wall clock)
    got: dict[str, float] = field(default_factory=dict)  # key -> when first consumed
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def first_send_after_kill(self) -> float:
        return min(t for t in self.sent.values() if t > self.killed_at) - self.killed_at

    @property
    def first_receive_after_kill(self) -> float:
        after = [self.got[k] for k, t in self.sent.items() if t > self.killed_at and k in self.got]
        return min(after) - self.killed_at

    def report(self) -> str:
        return (f"{self.client}: first send acknowledged {self.first_send_after_kill:.3f} s after the SIGKILL of "
                f"the master, first of those consumed {self.first_receive_after_kill:.3f} s after it; "
                f"{len(self.sent)} sends acknowledged, {len(self.failures)} failed, {len(self.got)} keys consumed; "
                f"failures: {sorted({str(f['fail'])[:160] for f in self.failures})[:4]}")


def _events(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a client's own log line on stdout
    return out


def run_across_kill(group: FailoverGroup, client: str, argv: list[str], tmp: Path, env: dict[str, str] | None = None,
                    cwd: Path | None = None, before_kill: int = 50, timeout: float = 180) -> Outcome:
    """Start the driver (its argv, with ``stop_file`` already in its command), wait for ``before_kill``
    acknowledged sends, SIGKILL the master, wait for a send acknowledged after the kill and for every
    acknowledged key to be consumed, then stop the driver. The client process is never restarted."""
    out_path, err_path = tmp / f"{client}.out", tmp / f"{client}.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd)
    try:
        def sent() -> dict[str, float]:
            return {e["sent"]: e["t"] for e in _events(out_path) if "sent" in e}

        def alive() -> None:
            assert proc.poll() is None, f"{client} driver exited: {err_path.read_text()[-3000:]}"

        wait_until(lambda: alive() or len(sent()) >= before_kill, timeout, f"{before_kill} sends by {client}")
        master = group.wait_master()
        assert master.proc is not None
        master.proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        master.proc.wait()
        wait_until(lambda: alive() or any(t > killed_at for t in sent().values()), timeout,
                   f"a send by {client} acknowledged after the kill")

        def all_consumed() -> bool:
            alive()
            events = _events(out_path)
            got = {e["got"] for e in events if "got" in e}
            acked = {e["sent"] for e in events if "sent" in e}
            return acked <= got and any(e["t"] > killed_at for e in events if "sent" in e and e["sent"] in got)

        wait_until(all_consumed, timeout, f"{client}'s consumer to read every acknowledged send")
    finally:
        (tmp / f"{client}.stop").touch()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    outcome = Outcome(client, killed_at)
    for e in _events(out_path):
        if "sent" in e:
            outcome.sent[e["sent"]] = e["t"]
        elif "got" in e:
            outcome.got.setdefault(e["got"], e["t"])
        elif "fail" in e:
            outcome.failures.append(e)
    return outcome
