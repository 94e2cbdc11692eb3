"""One client connection of the :class:`~broker_core.remoting.server.RemotingServer`: its responses, written in
the order they are sent (a file response's later ones wait in the outbox), and corking (:meth:`Connection.cork`):
while the requests of one read run, their small answers are held and leave in one ``writelines`` (one writev:
one system call and one wake-up of the client instead of one per answer). Held answers are bounded in number
and size, and any other kind of response writes them first, so order and the transport's high-water mark hold.

The server may also ask the client something over this connection (RocketMQ's ``Broker2Client``: running info,
consume directly, consumer status): :meth:`Connection.request` sends a request with an opaque of the broker's own
and waits for the response frame carrying it back (:meth:`Connection.response_arrived`). A lost connection fails
every such wait with ``ConnectionError``; a late response (after the timeout) is dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from broker_core.protocol import RemotingCommand
from broker_core.remoting.filesend import FileResponse, FileSender, GatherResponse

MAX_QUEUED = 8  # responses waiting behind a file response before the connection stops reading
# Responses held while the requests of one read run (Connection.cork): small ones only, a bounded number, so the
# transport's high-water mark still sees big output at once and pauses the reading of more requests.
CORK_MAX_BYTES = 8192
CORK_MAX_RESPONSES = 64

log = logging.getLogger(__name__)


class Connection:
    """One client connection. Responses go out in the order :meth:`send` is called: while a file response's
    region is on its way (``filesend``), later responses wait in ``outbox`` and follow it."""

    _ids = itertools.count(1)
    _opaques = itertools.count(1)  # requests the server sends to clients (RocketMQ's global requestId counter)

    def __init__(self, transport: asyncio.Transport) -> None:
        self.id = next(self._ids)
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.remote = f"{peer[0]}:{peer[1]}"
        self.attributes: dict[str, Any] = {}
        self.inflight = 0
        self.held = 0  # requests held by long polling (pulls and receives), capped per connection
        self.last_activity = 0.0
        self.closed = asyncio.Event()
        self.transport_full = False  # the transport's unsent output passed the high-water mark (pause_writing)
        self.reading_paused = False
        self.pauses = 0  # times reading was paused (observability)
        self.backlog: deque[RemotingCommand] = deque()  # decoded while paused, run on resume
        self.outbox: deque[bytes | FileResponse] = deque()  # waiting behind the file response being sent
        self.sender: FileSender | None = None
        self.draining = False
        self.on_output: Callable[[], None] | None = None  # the protocol's: called when ``paused`` changed
        # While the requests of one read run (``cork``), their small responses gather here and go out together
        # in one writev (``uncork``): one system call and one wake-up of the client instead of one per response.
        self.corked: list[bytes] | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}  # server-sent requests by opaque

    @property
    def paused(self) -> bool:
        """Not reading: the transport's output is past the high-water mark, or :data:`MAX_QUEUED` responses
        wait behind a file response."""
        return self.transport_full or len(self.outbox) >= MAX_QUEUED

    @property
    def write_buffer_size(self) -> int:
        """Bytes of responses not yet taken by the socket (the transport's buffer, the file response being sent
        and those queued behind it)."""
        queued = sum(len(x) if isinstance(x, bytes) else len(x.head()) + x.region.count for x in self.outbox)
        return int(self.transport.get_write_buffer_size()) + queued + (self.sender.remaining if self.sender else 0)

    def send(self, cmd: RemotingCommand | FileResponse | GatherResponse | bytes) -> None:
        if self.transport.is_closing():
            drop_response(cmd)
            return
        if self.sender is None and not self.outbox:
            if type(cmd) is bytes or isinstance(cmd, RemotingCommand):
                data = cmd.encode() if isinstance(cmd, RemotingCommand) else cmd
                corked = self.corked
                if corked is not None and len(data) <= CORK_MAX_BYTES:
                    corked.append(data)
                    if len(corked) >= CORK_MAX_RESPONSES:
                        self._write_corked()
                else:
                    if corked:
                        self._write_corked()
                    self.transport.write(data)
                return
            self._write_corked()  # what was held goes first
            if isinstance(cmd, GatherResponse):
                cmd.write_to(self.transport)
                return
        self._write_corked()
        was = self.paused
        self.outbox.append(cmd if isinstance(cmd, FileResponse | bytes)
                           else cmd.to_bytes() if isinstance(cmd, GatherResponse) else cmd.encode())
        self._drain()
        if self.paused != was and self.on_output is not None:
            self.on_output()

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``cmd`` to the client on this connection and wait for its response (RocketMQ's
        ``invokeSync(channel, request, timeout)``). Raises ``TimeoutError`` after ``timeout_s`` and
        ``ConnectionError`` when the connection is or gets lost."""
        if self.transport.is_closing() or self.closed.is_set():
            raise ConnectionError(f"connection to {self.remote} is closed")
        cmd.opaque = next(self._opaques) & 0x7FFFFFFF
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self.pending[cmd.opaque] = fut
        try:
            self.send(cmd)
            async with asyncio.timeout(timeout_s):
                return await fut
        finally:
            self.pending.pop(cmd.opaque, None)

    def response_arrived(self, cmd: RemotingCommand) -> None:
        """A response frame from the client: it completes the :meth:`request` waiting on its opaque (none: a
        late answer, dropped)."""
        fut = self.pending.pop(cmd.opaque, None)
        if fut is not None and not fut.done():
            fut.set_result(cmd)

    def fail_pending(self) -> None:
        """The connection is lost: every :meth:`request` waiting on it fails with ``ConnectionError``."""
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection to {self.remote} closed"))

    def cork(self) -> None:
        """Hold small responses until :meth:`uncork` (order is kept: any other response writes them first)."""
        if self.corked is None:
            self.corked = []

    def uncork(self) -> None:
        self._write_corked()
        self.corked = None

    def _write_corked(self) -> None:
        corked = self.corked
        if corked:
            self.corked = []
            if self.transport.is_closing():
                return
            if len(corked) == 1:
                self.transport.write(corked[0])
            else:
                self.transport.writelines(corked)

    def _drain(self) -> None:
        """Write queued responses in order until a file response must wait for the socket."""
        self.draining = True
        try:
            while self.sender is None and self.outbox and not self.transport.is_closing():
                item = self.outbox.popleft()
                if isinstance(item, bytes):
                    self.transport.write(item)
                    continue
                self.sender = FileSender(self.transport, item, self._file_sent)
                self.sender.pump()  # done at once: _file_sent cleared ``sender`` and the loop goes on
        finally:
            self.draining = False

    def _file_sent(self, exc: BaseException | None) -> None:
        self.sender = None
        if exc is not None:
            log.warning("connection %s: a file response failed, closing the connection: %s", self.remote, exc)
            self.close()
            return
        if not self.draining:  # finished from the event loop (the socket took the rest): what waited goes now
            was = self.paused
            self._drain()
            if self.paused != was and self.on_output is not None:
                self.on_output()

    def abort_output(self) -> None:
        """The connection is lost: stop the file response being sent and drop the queued ones (their descriptors
        are closed)."""
        if self.sender is not None:
            self.sender.abort()
            self.sender = None
        while self.outbox:
            item = self.outbox.popleft()
            if isinstance(item, FileResponse):
                item.region.close()

    def close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


def drop_response(resp: RemotingCommand | FileResponse | GatherResponse | bytes) -> None:
    """A response that will not be sent: a file response's descriptor is closed, a gather response's segments
    released."""
    if isinstance(resp, FileResponse):
        resp.region.close()
    elif isinstance(resp, GatherResponse):
        resp.release()
