"""The controllers' Raft log (pysyncobj) in process, one node on an ephemeral port: a new leader serves only
after its term marker is applied; events under another marker are dropped; the state comes back after a restart
from the journal and from a compaction's dump."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from broker_core.controller.events import ApplyBrokerIdEvent, ElectMasterEvent, encode_event
from broker_core.controller.raft import RaftLog
from broker_core.controller.replicas import ReplicasInfoManager


async def _node(store: Path) -> tuple[RaftLog, ReplicasInfoManager]:
    manager = ReplicasInfoManager()
    raft = RaftLog(node_id="n0", raft_peers=[("n0", "127.0.0.1:0")], store_path=store, manager=manager,
                   lock=threading.RLock(), loop=asyncio.get_running_loop())
    deadline = time.monotonic() + 30
    while not raft.is_serving():
        assert time.monotonic() < deadline, "the node never served"
        await asyncio.sleep(0.02)
    return raft, manager


async def _scenario(tmp: Path, compact: bool) -> None:
    raft, manager = await _node(tmp)
    try:
        assert raft.leader_id() == "n0" and raft.is_leader()
        assert await raft.propose([ApplyBrokerIdEvent("c", "b", "a:1", 1, "a:1;1"), ElectMasterEvent("b", True, 1)])
        assert manager.sync_state_info["b"].master_epoch == 1
        # a batch under a marker that is not the current one (a deposed leader's) is dropped
        done = asyncio.get_running_loop().create_future()
        raft.machine.apply_events("n9", 99, [encode_event(ElectMasterEvent("b", False))],
                                  callback=lambda r, e: raft.loop.call_soon_threadsafe(done.set_result, (r, e)))
        assert await asyncio.wait_for(done, 10) == (False, 0)
        assert manager.sync_state_info["b"].master_broker_id == 1
        if compact:
            raft.sync.forceLogCompaction()
            deadline = time.monotonic() + 30
            while not (tmp / "raft.dump").exists():
                assert time.monotonic() < deadline, "no dump written"
                await asyncio.sleep(0.05)
    finally:
        await asyncio.to_thread(raft.close)
    raft, manager = await _node(tmp)
    try:
        info = manager.sync_state_info["b"]
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set) == (1, 1, {1})
        assert manager.replica_info["b"].brokers == {1: ("a:1", "a:1;1")}
    finally:
        await asyncio.to_thread(raft.close)


def test_state_survives_a_restart_from_the_journal(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path, compact=False))


def test_state_survives_a_restart_from_a_dump(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path, compact=True))
