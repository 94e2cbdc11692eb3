"""Where a push consumer keeps its consumed offsets (upstream ``OffsetStore``): on the broker for CLUSTERING
(``RemoteBrokerOffsetStore``), in a local file for BROADCASTING (``LocalFileOffsetStore``).

Both answer :meth:`read` with the next offset to consume, or None when nothing was stored (the consumer then
starts by ``consume_from``), take :meth:`update` as often as messages are consumed, and write out on
:meth:`persist` (every ``persist_offset_interval`` s and at shutdown).

The local file lives where RocketMQ's does, ``<root>/<ip>@<instanceName>/<group>/offsets.json`` (root
``~/.rocketmq_offsets``), a name that does not change when the process restarts, so a restarted broadcasting
consumer resumes where it left off (at most the messages consumed since the last persist come again). It is
written to ``offsets.json.tmp``, synced, and renamed over the old one, the previous version kept as
``offsets.json.bak``: a crash leaves a whole file, and a file that does not parse falls back to the ``.bak``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from broker_core.client.message import ClientError, MessageQueue
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

# a request about a queue to its master (or a slave while the master is down): (response, answered by a slave)
AdminRequest = Callable[[MessageQueue, int, dict[str, object]], Awaitable[tuple[RemotingCommand, bool]]]


class RemoteBrokerOffsetStore:
    """Offsets on the broker of each queue: QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET, to the queue's master.

    While the master cannot be reached the commit goes to a slave (which keeps it in memory, as RocketMQ's) and
    stays in ``pending``; :meth:`persist` (every few seconds) sends pending offsets again until the master takes
    them, so what was consumed from a slave is committed back to the master when it returns."""

    def __init__(self, group: str, admin_request: AdminRequest) -> None:
        self.group = group
        self._request = admin_request
        self.pending: dict[MessageQueue, int] = {}

    async def read(self, mq: MessageQueue) -> int | None:
        if mq in self.pending:
            return self.pending[mq]
        resp, _ = await self._request(mq, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": self.group})
        return int(resp.header["offset"]) if resp.code == ResponseCode.SUCCESS else None

    async def update(self, mq: MessageQueue, offset: int) -> None:
        """Commit now; a broker that cannot be reached is logged and the next commit carries the offset."""
        try:
            resp, by_slave = await self._request(mq, RequestCode.UPDATE_CONSUMER_OFFSET,
                                                 {"consumerGroup": self.group, "commitOffset": offset})
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("cannot commit offset %d of %s: %s", offset, mq, exc)
            self.pending[mq] = offset
            return
        if by_slave or resp.code != ResponseCode.SUCCESS:
            self.pending[mq] = offset
        else:
            self.pending.pop(mq, None)

    async def persist(self) -> None:
        """Send again the offsets only a slave (or no broker) took."""
        for mq, offset in list(self.pending.items()):
            if self.pending.get(mq) == offset:
                await self.update(mq, offset)


DEFAULT_LOCAL_OFFSET_ROOT = Path.home() / ".rocketmq_offsets"


def local_offset_path(root: Path, client_ip: str, instance_name: str, group: str) -> Path:
    """RocketMQ's ``LocalFileOffsetStore`` path: ``<root>/<ip>@<instanceName>/<group>/offsets.json``."""
    return root / f"{client_ip}@{instance_name}" / group / "offsets.json"


def _load(path: Path) -> dict[str, int] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("cannot read the offsets in %s: %s", path, exc)
        return None
    if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
        log.warning("ignoring %s: not a map of queue to offset", path)
        return None
    return data


class LocalFileOffsetStore:
    """Offsets in ``path`` (JSON ``{"topic@broker#queue": offset}``), loaded at construction (from the ``.bak``
    when the file is missing or does not parse)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.backup = path.with_name(path.name + ".bak")
        loaded = _load(path)
        if loaded is None:
            loaded = _load(self.backup)
            if loaded is not None:
                log.warning("offsets of %s come from the backup %s", path, self.backup)
        self.offsets: dict[str, int] = loaded or {}

    async def read(self, mq: MessageQueue) -> int | None:
        return self.offsets.get(str(mq))

    async def update(self, mq: MessageQueue, offset: int) -> None:
        self.offsets[str(mq)] = offset

    async def persist(self) -> None:
        if not self.offsets:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.offsets, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.backup)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the renames survive a power loss
        finally:
            os.close(dir_fd)


OffsetStore = RemoteBrokerOffsetStore | LocalFileOffsetStore
