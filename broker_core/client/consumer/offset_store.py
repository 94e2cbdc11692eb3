"""Where a push consumer keeps its consumed offsets (upstream ``OffsetStore``): on the broker for CLUSTERING
(``RemoteBrokerOffsetStore``), in a local file for BROADCASTING (``LocalFileOffsetStore``).

Both answer :meth:`read` with the next offset to consume, or None when nothing was stored (the consumer then
starts by ``consume_from``), take :meth:`update` as often as messages are consumed, and write out on
:meth:`persist` (every ``persist_offset_interval`` s and at shutdown). The local file is replaced atomically
(``.tmp`` then rename), so a crash leaves the previous or the new offsets, never a torn file.
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

QueueRequest = Callable[[MessageQueue, int, dict[str, object]], Awaitable[RemotingCommand]]


class RemoteBrokerOffsetStore:
    """Offsets on the broker of each queue: QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET."""

    def __init__(self, group: str, queue_request: QueueRequest) -> None:
        self.group = group
        self._request = queue_request

    async def read(self, mq: MessageQueue) -> int | None:
        resp = await self._request(mq, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": self.group})
        return int(resp.header["offset"]) if resp.code == ResponseCode.SUCCESS else None

    async def update(self, mq: MessageQueue, offset: int) -> None:
        """Commit now; a broker that cannot be reached is logged and the next commit carries the offset."""
        try:
            await self._request(mq, RequestCode.UPDATE_CONSUMER_OFFSET,
                                {"consumerGroup": self.group, "commitOffset": offset})
        except (ClientError, ConnectionError, TimeoutError) as exc:
            log.warning("cannot commit offset %d of %s: %s", offset, mq, exc)

    async def persist(self) -> None:
        """Nothing to do: every update already went to the broker."""


class LocalFileOffsetStore:
    """Offsets in ``path`` (JSON ``{"topic@broker#queue": offset}``), loaded at construction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}

    async def read(self, mq: MessageQueue) -> int | None:
        return self.offsets.get(str(mq))

    async def update(self, mq: MessageQueue, offset: int) -> None:
        self.offsets[str(mq)] = offset

    async def persist(self) -> None:
        if not self.offsets:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.offsets))
        os.replace(tmp, self.path)


OffsetStore = RemoteBrokerOffsetStore | LocalFileOffsetStore
