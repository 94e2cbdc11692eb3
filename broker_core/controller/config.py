"""ControllerConfig: RocketMQ 5's controller keys (reference §1 "Controller keys"), read from a Java
``.properties`` file such as ``mqcontroller -c`` takes, or from the name server's file when
``enableControllerInNamesrv=true``.

Differences from RocketMQ, each a default of a key (the key itself works as in RocketMQ):
- ``scanNotActiveBrokerInterval`` defaults to 1000 ms (RocketMQ 5000): a silent broker is found within
  timeout + 1 s instead of timeout + 5 s. A crash that closes the TCP connection is found at once either way.
- ``controllerStorePath`` empty means ``~/DLedgerController`` as RocketMQ, holding pysyncobj's files.

Keys of our own (the consensus is pysyncobj's Raft, which needs a port of its own):
- ``controllerRaftPeers``: ``n0-host:port;n1-...``, the Raft port of each peer (same ids as
  ``controllerDLegerPeers``). Default: each peer's host with its port + :data:`RAFT_PORT_OFFSET`; a group of one
  (the usual embedded name server) needs no Raft peer and binds an ephemeral port.
- ``controllerRaftElectionTimeoutMs`` (default 600): a follower that hears nothing from the leader for a random
  time in [t, 2t] starts an election; a leader that hears from no majority for 2t steps down.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from broker_core.codec.properties_file import parse_properties

log = logging.getLogger(__name__)

RAFT_PORT_OFFSET = 1000
DEFAULT_CONFIG_BLACK_LIST = "configBlackList;configStorePath"
ALWAYS_BLACK = ("configBlackList", "configStorePath", "rocketmqHome")


def _key(default: Any, key: str, live: bool = False) -> Any:
    """A config field: its RocketMQ key and whether a change by UPDATE_CONTROLLER_CONFIG takes effect at once."""
    return field(default=default, metadata={"key": key, "live": live})


@dataclass
class ControllerConfig:
    controller_type: str = _key("DLedger", "controllerType")
    controller_dleger_group: str = _key("", "controllerDLegerGroup")
    controller_dleger_peers: str = _key("", "controllerDLegerPeers")
    controller_dleger_self_id: str = _key("", "controllerDLegerSelfId")
    controller_store_path: str = _key("", "controllerStorePath")
    scan_not_active_broker_interval_ms: int = _key(1000, "scanNotActiveBrokerInterval", True)
    scan_inactive_master_interval_ms: int = _key(5000, "scanInactiveMasterInterval", True)
    elect_master_max_retry_count: int = _key(3, "electMasterMaxRetryCount", True)
    enable_elect_unclean_master: bool = _key(False, "enableElectUncleanMaster", True)
    notify_broker_role_changed: bool = _key(True, "notifyBrokerRoleChanged", True)
    process_read_event: bool = _key(False, "processReadEvent", True)
    config_black_list: str = _key(DEFAULT_CONFIG_BLACK_LIST, "configBlackList")
    controller_raft_peers: str = _key("", "controllerRaftPeers")
    controller_raft_election_timeout_ms: int = _key(600, "controllerRaftElectionTimeoutMs")

    # -- loading --------------------------------------------------------------------------------------------

    @classmethod
    def keys(cls) -> dict[str, str]:
        """RocketMQ key -> attribute name."""
        out = {f.metadata["key"]: f.name for f in fields(cls)}
        return out

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ControllerConfig:
        """Known keys are taken (``ValueError`` naming the key for a bad value); others are left to the caller."""
        cfg = cls()
        cfg.update(props)
        return cfg

    @classmethod
    def load(cls, path: str | Path) -> ControllerConfig:
        text = Path(path).read_text(encoding="utf-8")
        return cls.from_properties(parse_properties(text, source=str(path)))

    def update(self, props: dict[str, str]) -> list[str]:
        """Set the known keys among ``props``; returns the keys taken."""
        names = self.keys()
        taken = []
        for key, raw in props.items():
            attr = names.get(key)
            if attr is None:
                continue
            current = getattr(self, attr)
            value: Any
            text = str(raw).strip()
            if isinstance(current, bool):
                value = text.lower() == "true"
            elif isinstance(current, int):
                try:
                    value = int(text)
                except ValueError:
                    raise ValueError(f"{key} must be an integer, got {raw!r}") from None
            else:
                value = text
            setattr(self, attr, value)
            taken.append(key)
        return taken

    def as_properties(self) -> dict[str, Any]:
        return {f.metadata["key"]: getattr(self, f.name) for f in fields(self)}

    def black_list(self) -> set[str]:
        return set(ALWAYS_BLACK) | {k for k in self.config_black_list.split(";") if k}

    # -- derived --------------------------------------------------------------------------------------------

    def peers(self) -> list[tuple[str, str]]:
        """``controllerDLegerPeers`` as ``[(id, host:port)]`` in file order."""
        return parse_peers(self.controller_dleger_peers, "controllerDLegerPeers")

    def raft_peers(self) -> list[tuple[str, str]]:
        if self.controller_raft_peers.strip():
            raft = parse_peers(self.controller_raft_peers, "controllerRaftPeers")
            if [i for i, _ in raft] != [i for i, _ in self.peers()]:
                raise ValueError("controllerRaftPeers must list the ids of controllerDLegerPeers, in the same order")
            return raft
        peers = self.peers()
        if len(peers) == 1:
            return [(peers[0][0], f"{peers[0][1].rpartition(':')[0]}:0")]
        out = []
        for node_id, addr in peers:
            host, _, port = addr.rpartition(":")
            if int(port) + RAFT_PORT_OFFSET > 65535:
                raise ValueError(f"peer {node_id} port {port}: the default Raft port (+{RAFT_PORT_OFFSET}) is past "
                                 f"65535; set controllerRaftPeers")
            out.append((node_id, f"{host}:{int(port) + RAFT_PORT_OFFSET}"))
        return out

    def self_addr(self) -> str:
        """This node's remoting address (its ``controllerDLegerPeers`` entry)."""
        return dict(self.peers())[self.controller_dleger_self_id]

    def store_path(self) -> Path:
        if self.controller_store_path:
            return Path(self.controller_store_path)
        return Path(os.path.expanduser("~")) / f"{self.controller_type}Controller"

    def validate(self) -> None:
        """``ValueError`` for a configuration the controller cannot start with (names the key)."""
        if self.controller_type not in ("DLedger", ""):
            raise ValueError(f"controllerType {self.controller_type!r} is not supported: this controller "
                             f"replicates with pysyncobj's Raft and takes the DLedger keys (controllerDLeger*)")
        if not self.controller_dleger_peers.strip():
            raise ValueError("controllerDLegerPeers is required (n0-host:port;n1-host:port;...)")
        if not self.controller_dleger_self_id.strip():
            raise ValueError("controllerDLegerSelfId is required")
        ids = [i for i, _ in self.peers()]
        if self.controller_dleger_self_id not in ids:
            raise ValueError(f"controllerDLegerSelfId {self.controller_dleger_self_id!r} is not in "
                             f"controllerDLegerPeers ({', '.join(ids)})")
        if len(set(ids)) != len(ids):
            raise ValueError("controllerDLegerPeers lists an id twice")
        self.raft_peers()
        for key, value in (("scanNotActiveBrokerInterval", self.scan_not_active_broker_interval_ms),
                           ("scanInactiveMasterInterval", self.scan_inactive_master_interval_ms),
                           ("controllerRaftElectionTimeoutMs", self.controller_raft_election_timeout_ms)):
            if value <= 0:
                raise ValueError(f"{key} must be positive, got {value}")


def parse_peers(text: str, key: str) -> list[tuple[str, str]]:
    """``n0-127.0.0.1:9878;n1-...`` -> ``[("n0", "127.0.0.1:9878"), ...]`` (split on ``;`` then the first
    ``-``, as DLedger does)."""
    out = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        node_id, sep, addr = part.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not node_id or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{key}: expected id-host:port, got {part!r}")
        out.append((node_id, addr))
    return out
