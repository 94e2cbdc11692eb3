"""The controller id a broker was given, persisted (RocketMQ 5 ``ReplicasManager``'s broker identity files;
reference ``rocketmq-controller.md`` §3.1): ``brokerIdentity`` holds ``cluster#brokerName#brokerId`` once the
controller accepted the id (1013), ``brokerIdentity-temp`` holds ``cluster#brokerName#brokerId#checkCode``
between asking for an id (1012) and that answer.

Invariant: a file naming another cluster or broker name is ignored (logged), never used.

Crash behaviour: each file is written whole to a temporary name, fsynced and renamed over the old one, so it is
either the old or the new content. A crash after the temp file and before the 1013 answer re-sends 1013 with the
same check code, which the controller accepts (same code); ``brokerIdentity`` is written before the temp file is
removed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


class BrokerIdentityFiles:
    def __init__(self, path: Path, cluster: str, broker_name: str) -> None:
        self.path = path
        self.temp_path = path.with_name(path.name + "-temp")
        self.cluster, self.broker_name = cluster, broker_name

    def read(self) -> tuple[int, str | None] | None:
        """``(id, None)`` from ``brokerIdentity``, else ``(id, checkCode)`` from the temp file, else None."""
        for path, temp in ((self.path, False), (self.temp_path, True)):
            try:
                parts = path.read_text().strip().split("#")
            except FileNotFoundError:
                continue
            if len(parts) >= 3 and parts[0] == self.cluster and parts[1] == self.broker_name:
                return int(parts[2]), (parts[3] if temp and len(parts) > 3 else None)
            log.error("%s names %s, not this broker (%s#%s): ignored", path, parts[:2], self.cluster, self.broker_name)
        return None

    def write_temp(self, broker_id: int, check_code: str) -> None:
        _write_synced(self.temp_path, f"{self.cluster}#{self.broker_name}#{broker_id}#{check_code}")

    def accepted(self, broker_id: int) -> None:
        """The controller accepted ``broker_id``: ``brokerIdentity`` replaces the temp file."""
        _write_synced(self.path, f"{self.cluster}#{self.broker_name}#{broker_id}")
        self.temp_path.unlink(missing_ok=True)

    def refused(self) -> None:
        self.temp_path.unlink(missing_ok=True)


def _write_synced(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
