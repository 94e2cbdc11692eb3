"""The failover nemesis (issue 34), run inside the clients' network namespace by ``test_failover_nemesis.py``:
``python -m tests.integration.nemesis_driver CONFIG.json``; prints one JSON result line on stdout.

It starts three controllers, a name server and a group of three controller-mode brokers, each in its own
namespace (``ip netns exec``), then runs SDK producers (two round-robin, one orderly on one queue; the Apache C++
client too when ``.venv-rocketmq`` exists) and a reader, and injects one fault a round, in a seeded order that
mixes, evenly:

- ``kill_master``: SIGKILL of the master; it restarts on its address after a new master took over;
- ``stop_master``: SIGSTOP of the master (a paused master), SIGCONT once a new master took over;
- ``part_controllers`` / ``part_slaves`` / ``part_both``: the master cut from the controllers, from its slaves,
  or from both (blackhole routes in both directions, inside the namespaces), healed once writes go on;
- ``kill_controller_leader``: SIGKILL of the controllers' Raft leader, restarted after writes went on.

A round ends when writes are acknowledged again after the fault and, once healed, the SyncStateSet holds the
three brokers again. At the end every replica must hold the master's CommitLog end, and the checker of
``failover_cluster.check`` runs over every acknowledged send, a full read of the topic and every broker's epoch
cache. Per round it reports the write-unavailability window: from the fault to the first acknowledged send
after it.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from broker_core.client import AdminClient, ClientError, PullConsumer
from broker_core.protocol import RemotingCommand
from broker_core.protocol.controller import ControllerRequestCode, GetMetaDataResponseHeader
from broker_core.remoting.blocking import BlockingClient
from tests.conftest import ROOT
from tests.integration.failover_cluster import TOPIC, Ack, LoggingProducer, check, eval_list, read_group

ACTIONS = ["kill_master", "stop_master", "part_controllers", "part_slaves", "part_both", "kill_controller_leader"]
BROKER_PORT, HA_PORT, CONTROLLER_PORT, RAFT_PORT, NAMESRV_PORT = 10911, 10912, 9878, 10878, 9876
CPP_PYTHON = ROOT / ".venv-rocketmq" / "bin" / "python"

BROKER_CONF = """brokerClusterName=NemesisCluster
brokerName=broker-nem
brokerIP1={ip}
enableControllerMode=true
controllerAddr={controllers}
allAckInSyncStateSet=true
controllerHeartBeatTimeoutMills=3000
syncBrokerMetadataPeriod=1000
checkSyncStateSetPeriod=1000
haMaxTimeSlaveNotCatchup=3000
haSendHeartbeatInterval=1000
haHousekeepingInterval=4000
haListenPort={ha_port}
registerNameServerPeriod=5000
defaultTopicQueueNums=4
mapedFileSizeCommitLog=16777216
warmMapedFileEnable=false
"""


class Proc:
    """A process in a namespace, restartable with the same arguments."""

    def __init__(self, ns: str, args: list[str], log: Path) -> None:
        self.ns, self.args, self.log = ns, args, log
        self.popen: subprocess.Popen | None = None  # type: ignore[type-arg]

    def start(self) -> Proc:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.popen = subprocess.Popen(["ip", "netns", "exec", self.ns, sys.executable, *self.args], cwd=ROOT,
                                      env=env, stdout=subprocess.PIPE, stderr=open(self.log, "ab"))
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline().decode()
        if not line.startswith("READY"):
            self.popen.kill()
            raise RuntimeError(f"{self.args} did not start in {self.ns}: {line!r}: {self.log.read_text()[-2000:]}")
        threading.Thread(target=self.popen.stdout.read, daemon=True).start()
        return self

    def signal(self, sig: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.kill(self.popen.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait()

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


def _route(ns: str, ip: str, add: bool) -> None:
    subprocess.run(["ip", "-n", ns, "route", "add" if add else "del", "blackhole", f"{ip}/32"], check=add,
                   capture_output=True)


class Nemesis:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.tmp = Path(cfg["tmp"])
        self.rounds = int(cfg["rounds"])
        self.rnd = random.Random(int(cfg.get("seed", 1)))
        self.brokers_ns: list[tuple[str, str]] = [tuple(x) for x in cfg["brokers"]]  # type: ignore[misc]
        self.ctrls_ns: list[tuple[str, str]] = [tuple(x) for x in cfg["controllers"]]  # type: ignore[misc]
        ns_ns, ns_ip = cfg["namesrv"]
        self.namesrv = f"{ns_ip}:{NAMESRV_PORT}"
        self.namesrv_proc = Proc(ns_ns, ["-m", "broker_core.namesrv", "--listen", self.namesrv, "--scan-interval-ms",
                                         "500", "--broker-expire-ms", "10000"], self.tmp / "namesrv.log")
        self.ctrl_addrs = [f"{ip}:{CONTROLLER_PORT}" for _, ip in self.ctrls_ns]
        peers = ";".join(f"n{i}-{a}" for i, a in enumerate(self.ctrl_addrs))
        raft = ";".join(f"n{i}-{ip}:{RAFT_PORT}" for i, (_, ip) in enumerate(self.ctrls_ns))
        self.ctrls: list[Proc] = []
        for i, (ns, _) in enumerate(self.ctrls_ns):
            conf = self.tmp / f"controller-n{i}.conf"
            conf.write_text(f"controllerDLegerGroup=nemesis\ncontrollerDLegerPeers={peers}\ncontrollerRaftPeers={raft}\n"
                            f"controllerDLegerSelfId=n{i}\ncontrollerStorePath={self.tmp / f'ctrl-n{i}'}\n"
                            "scanInactiveMasterInterval=1000\nscanNotActiveBrokerInterval=1000\n")
            self.ctrls.append(Proc(ns, ["-m", "broker_core.controller", "--config", str(conf)],
                                   self.tmp / f"controller-n{i}.log"))
        self.brokers: list[Proc] = []
        self.addrs: list[str] = []
        for i, (ns, ip) in enumerate(self.brokers_ns):
            conf = self.tmp / f"broker{i}.conf"
            conf.write_text(BROKER_CONF.format(ip=ip, controllers=";".join(self.ctrl_addrs), ha_port=HA_PORT))
            self.addrs.append(f"{ip}:{BROKER_PORT}")
            self.brokers.append(Proc(ns, ["-m", "broker_core", "--store-dir", str(self.tmp / f"store{i}"), "--listen",
                                          self.addrs[-1], "--namesrv", self.namesrv, "--config", str(conf)],
                                     self.tmp / f"broker{i}.log"))
        self.admin = AdminClient(self.namesrv)
        self.blocking = BlockingClient(connect_timeout=1.0)
        self.producers: list[LoggingProducer] = []
        self.cpp_acks: list[Ack] = []
        self.reads = 0
        self._stop = threading.Event()

    # ------------------------------------------------------------------ observation
    def runtime(self, i: int) -> dict[str, str] | None:
        p = self.brokers[i].popen
        if p is None or p.poll() is not None:
            return None
        try:
            return {k: str(v) for k, v in self.admin.broker_runtime(self.addrs[i]).items()}
        except (ClientError, ConnectionError, TimeoutError, OSError):
            return None

    def master(self) -> tuple[int, int] | None:
        """(broker index, epoch) of the newest-epoch running master."""
        best = None
        for i in range(len(self.brokers)):
            info = self.runtime(i)
            if info and info.get("fenced") == "False" and info.get("role") == "SYNC_MASTER":
                epoch = int(info.get("masterEpoch", "0"))
                if best is None or epoch > best[1]:
                    best = (i, epoch)
        return best

    def controller_leader(self) -> int | None:
        for addr in self.ctrl_addrs:
            try:
                resp = self.blocking.invoke(addr, RemotingCommand.request(
                    ControllerRequestCode.CONTROLLER_GET_METADATA_INFO), 2.0)
            except (ConnectionError, TimeoutError, OSError):
                continue
            leader = GetMetaDataResponseHeader.from_ext(resp.header).controller_leader_address
            if leader in self.ctrl_addrs:
                return self.ctrl_addrs.index(leader)
        return None

    def acks(self) -> list[Ack]:
        return [a for p in self.producers for a in p.acks] + self.cpp_acks

    def first_ack_after(self, t: float) -> float | None:
        times = [a.at for a in self.acks() if a.at > t]
        return min(times) if times else None

    def wait(self, cond: Any, timeout: float, what: str) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(0.1)
        print(f"nemesis: timed out waiting for {what}", file=sys.stderr)
        return False

    def in_sync(self, n: int = 3) -> bool:
        m = self.master()
        if m is None:
            return False
        info = self.runtime(m[0]) or {}
        return len(eval_list(info.get("syncStateSet", "[]"))) >= n

    # ------------------------------------------------------------------ faults
    def _cut(self, i: int, peers: list[tuple[str, str]], add: bool) -> None:
        ns, ip = self.brokers_ns[i]
        for pns, pip in peers:
            _route(ns, pip, add)
            _route(pns, ip, add)

    def fault(self, action: str) -> dict[str, Any]:
        """Inject ``action``, hold it until its effect is over (a new master took writes; the set shrank and the
        master took writes; a new controller leader while writes went on), heal, wait for three in sync."""
        m = self.master()
        if m is None:
            return {"action": action, "ok": False, "error": "no master before the fault"}
        mi, epoch = m
        old_addr = self.addrs[mi]
        slaves = [self.brokers_ns[j] for j in range(len(self.brokers)) if j != mi]
        record: dict[str, Any] = {"action": action, "old_master": mi, "old_epoch": epoch}
        heal: Any = None
        t0 = time.monotonic()
        if action == "kill_master":
            self.brokers[mi].kill()
            heal = self.brokers[mi].start
        elif action == "stop_master":
            self.brokers[mi].signal(signal.SIGSTOP)
            heal = lambda: self.brokers[mi].signal(signal.SIGCONT)  # noqa: E731
        elif action.startswith("part_"):
            peers = {"part_controllers": self.ctrls_ns, "part_slaves": slaves,
                     "part_both": self.ctrls_ns + slaves}[action]
            self._cut(mi, peers, True)
            heal = lambda: self._cut(mi, peers, False)  # noqa: E731
        elif action == "kill_controller_leader":
            leader = self.controller_leader()
            record["controller_leader"] = leader
            if leader is not None:
                self.ctrls[leader].kill()
                heal = self.ctrls[leader].start
        if action == "part_slaves":  # the master stays: writes go on once the set shrank to the master alone
            shrunk: list[float] = []

            def effect() -> bool:
                if not shrunk and not self.in_sync(2):
                    shrunk.append(time.monotonic())
                return bool(shrunk) and self.first_ack_after(shrunk[0]) is not None
        elif action == "kill_controller_leader":
            def effect() -> bool:
                leader = self.controller_leader()
                return leader is not None and leader != record.get("controller_leader") and \
                    self.first_ack_after(time.monotonic() - 0.5) is not None
        else:  # a new master took writes
            def effect() -> bool:
                return any(a.at > t0 and a.store and a.store != old_addr for a in self.acks())
        ok = self.wait(effect, 90, f"the effect of {action}")
        t_effect = time.monotonic()
        new = [a.at for a in self.acks() if a.at > t0 and a.store and a.store != old_addr]
        if new and action in ("kill_master", "stop_master", "part_controllers", "part_both"):
            record["to_new_master_s"] = round(min(new) - t0, 3)
        now = self.master()
        record["new_master"], record["new_epoch"] = (now if now else (None, None))
        if heal is not None:
            heal()
        t_heal = time.monotonic()
        ok = self.wait(self.in_sync, 90, f"the SyncStateSet to hold 3 after {action}") and ok
        times = sorted(a.at for a in self.acks() if t0 < a.at <= t_effect)
        gaps = [b - a for a, b in zip([t0, *times], times, strict=False)]
        record["unavailable_s"] = round(max(gaps), 3) if gaps else None
        record["held_s"] = round(t_heal - t0, 3)
        record["acked_in_round"] = len([a for a in self.acks() if a.at > t0])
        record["ok"] = ok
        return record

    # ------------------------------------------------------------------ clients
    def _reader(self) -> None:
        consumer = PullConsumer("nemesis-reader", self.namesrv).start()
        offsets: dict[Any, int] = {}
        try:
            while not self._stop.is_set():
                try:
                    for mq in consumer.fetch_queues(TOPIC):
                        res = consumer.pull(mq, offsets.get(mq, 0), 64)
                        self.reads += len(res.messages)
                        offsets[mq] = res.next_begin_offset
                except (ClientError, ConnectionError, TimeoutError, OSError):
                    pass
                self._stop.wait(0.2)
        finally:
            consumer.shutdown()

    def _cpp(self, tag: str, n: int) -> None:
        """The Apache C++ client sends ``n`` messages (sync, errors captured): its SEND_OK ones are acks."""
        keys = [f"{tag}-{i}" for i in range(n)]
        cmd = {"op": "produce", "namesrv": self.namesrv, "group": f"cpp-{tag}", "mode": "sync", "capture_errors": True,
               "messages": [{"topic": TOPIC, "body": base64.b64encode(k.encode() * 4).decode(), "keys": k}
                            for k in keys]}
        try:
            done = subprocess.run([str(CPP_PYTHON), str(ROOT / "tests" / "compat" / "cpp_client.py"), json.dumps(cmd)],
                                  capture_output=True, timeout=120, check=False)
            results = json.loads(done.stdout.decode().strip().splitlines()[-1])["results"]
        except (subprocess.TimeoutExpired, ValueError, IndexError, KeyError) as exc:
            print(f"nemesis: C++ producer {tag}: {exc}", file=sys.stderr)
            return
        now = time.monotonic()
        errors = sorted({str(r.get("error", ""))[:120] for r in results if "error" in r})
        print(f"nemesis: C++ producer {tag}: {sum('error' not in r for r in results)} answered, errors {errors}",
              file=sys.stderr)
        for key, r in zip(keys, results, strict=False):
            if r.get("status") in ("OK", "SEND_OK"):  # the C++ binding names SEND_OK "OK"
                self.cpp_acks.append(Ack(key, -1, -1, now))

    # ------------------------------------------------------------------ run
    def run(self) -> dict[str, Any]:
        for c in self.ctrls:
            c.start()
        self.namesrv_proc.start()
        self.brokers[0].start()
        if not self.wait(lambda: self.master() is not None, 60, "the first master"):
            return {"error": "no first master"}
        for b in self.brokers[1:]:
            b.start()
        if not self.wait(self.in_sync, 60, "three in sync"):
            return {"error": "the group never got in sync"}
        self.producers = [LoggingProducer(self.namesrv, "rr1"), LoggingProducer(self.namesrv, "rr2"),
                          LoggingProducer(self.namesrv, "ord", orderly_queue=1)]
        for p in self.producers:
            p.start()
        reader = threading.Thread(target=self._reader, daemon=True)
        reader.start()
        cpp = CPP_PYTHON.exists()
        plan = [ACTIONS[i % len(ACTIONS)] for i in range(self.rounds)]
        self.rnd.shuffle(plan)
        records = []
        for r, action in enumerate(plan):
            self.wait(lambda: len(self.acks()) > 0, 60, "acks before the round")
            cpp_thread = None
            if cpp:
                cpp_thread = threading.Thread(target=self._cpp, args=(f"cpp{r}", 20), daemon=True)
                cpp_thread.start()
            rec = self.fault(action)
            if cpp_thread is not None:
                cpp_thread.join(150)
            rec["round"] = r
            records.append(rec)
            print(f"nemesis round {r}: {json.dumps(rec)}", file=sys.stderr, flush=True)
        for p in self.producers:
            p.stop()
        self._stop.set()
        reader.join(30)
        m = self.master()
        end = int((self.runtime(m[0]) or {}).get("commitLogMaxOffset", "-1")) if m else -1
        caught_up = self.wait(lambda: all(int((self.runtime(i) or {}).get("commitLogMaxOffset", "-2")) == end
                                          for i in range(len(self.brokers))), 90, "every replica at the master's end")
        caches = {}
        for i in range(len(self.brokers)):
            info = self.runtime(i) or {}
            caches[self.addrs[i]] = [tuple(e) for e in eval_list(info.get("epochEntries", "[]"))]
        acks = self.acks()
        positioned = [a for a in acks if a.queue_id >= 0]
        read = read_group(self.namesrv, settle_s=2.0)
        violations = check(positioned, read, caches, orderly=True)
        keys_read = set(read.values())
        lost_cpp = [a.key for a in self.cpp_acks if a.key not in keys_read]
        if lost_cpp:
            violations.append(f"{len(lost_cpp)} messages acknowledged to the C++ client not read back")
        windows = sorted(r["unavailable_s"] for r in records if r.get("unavailable_s") is not None)
        to_new = sorted(r["to_new_master_s"] for r in records if r.get("to_new_master_s") is not None)
        return {"rounds": records, "violations": violations, "acked": len(acks), "cpp_acked": len(self.cpp_acks),
                "read": len(read), "reads_during_run": self.reads, "caught_up": caught_up,
                "epoch_caches": {k: [list(e) for e in v] for k, v in caches.items()},
                "failed_sends": sum(len(p.failures) for p in self.producers), "windows": windows,
                "to_new_master": to_new,
                "all_rounds_ok": all(r.get("ok") for r in records)}

    def close(self) -> None:
        self._stop.set()
        for p in self.producers:
            if p.is_alive():
                p.stop()
        for b in self.brokers:
            b.stop()
        self.namesrv_proc.stop()
        for c in self.ctrls:
            c.stop()
        self.blocking.close()
        self.admin.shutdown()


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    nemesis = Nemesis(cfg)
    try:
        result = nemesis.run()
    finally:
        nemesis.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
