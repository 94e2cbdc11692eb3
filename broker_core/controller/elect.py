"""DefaultElectPolicy (reference §3.3 step 3): who becomes master of a broker-set.

Candidates are the alive ids of the SyncStateSet; only if none is electable, and only when unclean election is
on (the caller then passes ``all_replicas``), the alive ids of every registered replica. Among candidates: keep
the old master if it is one and no other id is designated; a designated id (admin ``designateElect``) wins only
if it is a candidate, else nobody; otherwise the best heartbeat by epoch desc, maxOffset desc, electionPriority
asc (then the lowest id, so every controller picks the same one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

# (clusterName, brokerName, brokerId) -> alive?
AlivePredicate = Callable[[str, str, int], bool]


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What a heartbeat told about a replica (-1 where the broker sent nothing)."""

    broker_id: int
    epoch: int = -1
    max_offset: int = -1
    election_priority: int = (1 << 31) - 1  # Integer.MAX_VALUE


LiveInfoGetter = Callable[[str, str, int], "LiveInfo | None"]


class DefaultElectPolicy:
    def __init__(self, alive: AlivePredicate | None = None, live_info: LiveInfoGetter | None = None) -> None:
        self.alive = alive
        self.live_info = live_info

    def elect(self, cluster: str, broker_name: str, sync_state_set: Iterable[int] | None,
              all_replicas: Iterable[int] | None, old_master: int | None, prefer: int | None) -> int | None:
        if sync_state_set is not None:
            chosen = self._try(cluster, broker_name, set(sync_state_set), old_master, prefer)
            if chosen is not None:
                return chosen
        if all_replicas is not None:
            return self._try(cluster, broker_name, set(all_replicas), old_master, prefer)
        return None

    def _try(self, cluster: str, broker_name: str, ids: set[int], old_master: int | None,
             prefer: int | None) -> int | None:
        if self.alive is not None:
            ids = {i for i in ids if self.alive(cluster, broker_name, i)}
        if not ids:
            return None
        if old_master in ids and (prefer is None or prefer == old_master):
            return old_master
        if prefer is not None:
            return prefer if prefer in ids else None
        if self.live_info is not None:
            infos = [self.live_info(cluster, broker_name, i) or LiveInfo(i) for i in ids]
            best = min(infos, key=lambda x: (-x.epoch, -x.max_offset, x.election_priority, x.broker_id))
            return best.broker_id
        return min(ids)
