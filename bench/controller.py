"""Controller benchmark: how long the controllers take to act, without brokers' own work in the figure.
``python -m bench.controller --help``.

Three controller processes (or ``--controllers 1``) on this machine and stand-in brokers of one broker-set (the
test's :class:`FakeBroker`: registration, 904 heartbeats every 0.5 s over connections of their own, a listener
for 1008). Each round a new replica joins the SyncStateSet, then the master's connections close (what a SIGKILL
of a broker does) and the round measures:

- ``elect``: from the close to the 1008 NOTIFY_BROKER_ROLE_CHANGED naming the new master arriving at it (the
  controller's detection, Raft commit and notification; the broker's switch and the client's route come on
  top, see bench.failover);
- with ``--kill-leader``, every other round first SIGKILLs the controller leader and measures ``leader``: from
  the kill to a new leader answering a queued request (Raft election timeout + the new leader's marker commit).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
from pathlib import Path

from broker_core.client.controller_admin import ControllerAdmin
from broker_core.errors import ClientError
from broker_core.protocol import RemotingCommand
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ControllerRequestCode,
    ElectMasterRequestHeader,
    encode_sync_state_set,
)
from broker_core.remoting.blocking import BlockingClient
from tests.integration.controller_procs import FakeBroker, controller_confs, start_controller, stop_process

R = ControllerRequestCode


def _serving_leader(admin: ControllerAdmin, not_this: str | None = None) -> str:
    while True:
        try:
            leader = admin.leader(refresh=True)
            if leader != not_this:
                admin.sync_state_data(["none"])
                return leader
        except (OSError, ClientError):
            pass
        time.sleep(0.005)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(name: str, values: list[float]) -> None:
    if values:
        print(f"{name}: n={len(values)} p50={statistics.median(values) * 1000:.1f} ms "
              f"p99={_pct(values, 0.99) * 1000:.1f} ms max={max(values) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.controller", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--kill-leader", action="store_true", help="kill the controller leader every other round")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    files, peers = controller_confs(tmp, args.controllers)
    procs = {p: start_controller(f, tmp / f"n{i}.log") for i, (f, p) in enumerate(zip(files, peers, strict=True))}
    admin, client = ControllerAdmin(";".join(peers)), BlockingClient()
    elect: list[float] = []
    leader_times: list[float] = []
    brokers: list[FakeBroker] = []
    try:
        leader = _serving_leader(admin)
        cur = FakeBroker("c", "bench", peers)
        brokers.append(cur)
        cur.join(client, leader)
        cur.start_heartbeats()
        time.sleep(1.0)
        r = client.invoke(leader, RemotingCommand.request(
            R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader("c", "bench", cur.broker_id or 1).to_ext()))
        epoch, sss_epoch = int(r.header["masterEpoch"]), int(r.header["syncStateSetEpoch"])
        for rnd in range(args.rounds):
            nxt = FakeBroker("c", "bench", peers)
            brokers.append(nxt)
            leader = _serving_leader(admin)
            nxt.join(client, leader)
            nxt.start_heartbeats()
            time.sleep(1.2)  # its heartbeats reach every controller
            altered = client.invoke(leader, RemotingCommand.request(
                R.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader("bench", cur.broker_id, epoch)
                .to_ext(), encode_sync_state_set({cur.broker_id or 0, nxt.broker_id or 0}, sss_epoch)))
            assert altered.code == 0, (altered.code, altered.remark)
            if args.kill_leader and args.controllers > 1 and rnd % 2 == 0:
                procs[leader].send_signal(signal.SIGKILL)
                procs[leader].wait()
                t0 = time.monotonic()
                _serving_leader(admin, not_this=leader)
                leader_times.append(time.monotonic() - t0)
                i = peers.index(leader)
                procs[leader] = start_controller(files[i], tmp / f"n{i}-{rnd}.log")
            t0 = time.monotonic()
            cur.stop()
            while not any(c.code == R.NOTIFY_BROKER_ROLE_CHANGED and c.header.get("masterBrokerId") ==
                          str(nxt.broker_id) for c in nxt.notifications):
                time.sleep(0.001)
            elect.append(time.monotonic() - t0)
            note = [c for c in nxt.notifications if c.code == R.NOTIFY_BROKER_ROLE_CHANGED][-1]
            epoch, sss_epoch = int(note.header["masterEpoch"]), int(note.header["syncStateSetEpoch"])
            cur = nxt
        _report("elect (master connection closed -> 1008 at the new master)", elect)
        _report("leader (controller leader SIGKILL -> a new leader serves)", leader_times)
    finally:
        for b in brokers:
            b.stop()
        client.close()
        admin.close()
        for p in procs.values():
            stop_process(p, 10)


if __name__ == "__main__":
    main()
