"""The controllers' replicated log on pysyncobj's Raft (PyPI ``pysyncobj``, embedded: a thread of this process
with a TCP port of its own, see :mod:`broker_core.controller.config` for the port rule).

Each log entry applies a batch of controller events (:mod:`broker_core.controller.events`, RocketMQ's i16 id +
fastjson form) to the :class:`ReplicasInfoManager`, under a lock that request checks also take.

Leadership and stale proposals. pysyncobj forwards a proposal made on a node that is no longer leader to the
current leader, which would apply events checked against an older state. So, as RocketMQ's DLedger controller
commits an empty entry before serving, a new leader first commits a *term marker* ``(node id, raft term)``;
the state machine keeps the marker with the highest term, and applies an event batch only if it carries that
marker. A node serves queued requests only after its own marker is applied and while it is the Raft leader.
Every node applies the same entries in the same order, so every node ends in the same state.

Files under ``controllerStorePath``: ``raft.journal`` (+ ``.meta``: term, vote, commit index) and
``raft.dump`` (a JSON snapshot taken by log compaction). A restarted node reloads both, then catches up from the
leader. The journal is written through mmap without fsync: it survives a process crash, not the power loss of
a majority of the controllers at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from broker_core.controller.events import Event, decode_event, encode_event
from broker_core.controller.replicas import ReplicasInfoManager

log = logging.getLogger(__name__)

_LEADER = 2  # pysyncobj _RAFT_STATE.LEADER


class _StateMachine(SyncObjConsumer):
    """The replicated part: the manager's tables and the current term marker."""

    def __init__(self, manager: ReplicasInfoManager, lock: threading.RLock,
                 on_events: Callable[[list[Event]], None] | None) -> None:
        super().__init__()
        self._manager = manager
        self._lock = lock
        self._on_events = on_events
        self.marker: tuple[str, int] = ("", -1)

    @replicated
    def start_term(self, node_id: str, term: int) -> bool:
        with self._lock:
            if term <= self.marker[1]:
                return False
            self.marker = (node_id, term)
            return True

    @replicated
    def apply_events(self, node_id: str, term: int, entries: list[bytes]) -> bool:
        with self._lock:
            if (node_id, term) != self.marker:
                log.warning("dropping %d event(s) proposed by %s in term %d: the current leader marker is %s",
                            len(entries), node_id, term, self.marker)
                return False
            events = [decode_event(e) for e in entries]
            for event in events:
                self._manager.apply(event)
        if self._on_events is not None:
            try:
                self._on_events(events)
            except Exception:  # an observer must not stop the log
                log.exception("event observer failed")
        return True

    def _serialize(self) -> dict[str, Any]:
        with self._lock:
            return {"state": json.dumps(self._manager.snapshot()), "marker": list(self.marker)}

    def _deserialize(self, data: dict[str, Any]) -> None:
        with self._lock:
            self._manager.restore(json.loads(data["state"]))
            self.marker = (str(data["marker"][0]), int(data["marker"][1]))


class RaftLog:
    """One controller's Raft node. ``on_leader_change(is_serving)`` runs on ``loop``."""

    def __init__(self, *, node_id: str, raft_peers: list[tuple[str, str]], store_path: Path,
                 manager: ReplicasInfoManager, lock: threading.RLock, loop: asyncio.AbstractEventLoop,
                 election_timeout_ms: int = 600,
                 on_serving_change: Callable[[bool], None] | None = None,
                 on_events: Callable[[list[Event]], None] | None = None) -> None:
        self.node_id = node_id
        self.loop = loop
        self.addr_of = dict(raft_peers)
        self.id_of = {a: i for i, a in raft_peers}
        self.self_addr = self.addr_of[node_id]
        self.on_serving_change = on_serving_change
        self.serving = False
        self._serving_term = -1
        store_path.mkdir(parents=True, exist_ok=True)
        t = election_timeout_ms / 1000
        conf = SyncObjConf(
            journalFile=str(store_path / "raft.journal"), fullDumpFile=str(store_path / "raft.dump"),
            useFork=False,  # the dump is small; no fork() of a process with an event loop and threads
            appendEntriesUseBatch=False,  # send each proposal at once: latency over throughput
            appendEntriesPeriod=min(0.1, t / 5), raftMinTimeout=t, raftMaxTimeout=2 * t,
            leaderFallbackTimeout=2 * t, connectionTimeout=max(3.5, 2 * t), connectionRetryTime=min(1.0, 2 * t),
            commandsWaitLeader=False, onStateChanged=self._state_changed, dynamicMembershipChange=False)
        self.machine = _StateMachine(manager, lock, on_events)
        others = [a for i, a in raft_peers if i != node_id]
        self.sync = SyncObj(self.self_addr, others, conf, consumers=[self.machine])

    # -- leadership ----------------------------------------------------------------------------------------

    def leader_id(self) -> str | None:
        leader = self.sync._getLeader()
        return None if leader is None else self.id_of.get(leader.id)

    def is_leader(self) -> bool:
        return bool(self.sync._isLeader())

    def is_serving(self) -> bool:
        return self.serving and self.is_leader() and self.sync._getTerm() == self._serving_term

    def _state_changed(self, old: int, new: int) -> None:  # the raft thread
        if new == _LEADER:
            term = self.sync._getTerm()
            self.loop.call_soon_threadsafe(self._begin_term, term)
        elif old == _LEADER:
            self.loop.call_soon_threadsafe(self._set_serving, False, -1)

    def _begin_term(self, term: int) -> None:
        def done(result: Any, error: int) -> None:
            ok = error == FAIL_REASON.SUCCESS and bool(result)
            self.loop.call_soon_threadsafe(self._term_started, term, ok)

        if self.is_leader() and self.sync._getTerm() == term:
            self.machine.start_term(self.node_id, term, callback=done)

    def _term_started(self, term: int, ok: bool) -> None:
        if ok and self.is_leader() and self.sync._getTerm() == term:
            log.info("controller %s leads (raft term %d) and serves", self.node_id, term)
            self._set_serving(True, term)
        elif self.is_leader() and self.sync._getTerm() == term:  # not committed yet: try again
            self.loop.call_later(0.2, self._begin_term, term)

    def _set_serving(self, serving: bool, term: int) -> None:
        changed = serving != self.serving
        self.serving, self._serving_term = serving, term
        if changed and self.on_serving_change is not None:
            self.on_serving_change(serving)

    # -- proposals -----------------------------------------------------------------------------------------

    async def propose(self, events: list[Event], timeout: float = 5.0) -> bool:
        """Commit ``events`` as one entry under this leader's marker; True once applied here. False: not
        committed under this leadership (lost it, or the entry was dropped)."""
        fut: asyncio.Future[bool] = self.loop.create_future()

        def settle(ok: bool) -> None:
            if not fut.done():
                fut.set_result(ok)

        def done(result: Any, error: int) -> None:
            self.loop.call_soon_threadsafe(settle, error == FAIL_REASON.SUCCESS and bool(result))

        self.machine.apply_events(self.node_id, self._serving_term, [encode_event(e) for e in events],
                                  callback=done)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False

    def status(self) -> dict[str, Any]:
        return dict(self.sync.getStatus())

    def close(self) -> None:
        self.sync.destroy_synchronous()
