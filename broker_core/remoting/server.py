"""RemotingServer: accepts connections, decodes frames, runs one task per request, writes responses.

Guarantees: a malformed or oversized frame closes only that connection (after a SYSTEM_ERROR frame naming
the problem); an unknown code gets REQUEST_CODE_NOT_SUPPORTED; a handler that raises gets SYSTEM_ERROR
with the error text; a connection silent for ``idle_timeout`` seconds is closed (half-open peers); a
connection with more than ``max_inflight`` requests in flight gets SYSTEM_BUSY for the excess. Other
connections are never affected.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand, ResponseCode
from broker_core.protocol.command import DEFAULT_MAX_FRAME_BYTES

log = logging.getLogger(__name__)

class BadRequest(ValueError):
    """Raised by a handler for a request it cannot parse; answered with BAD_REQUEST and the message."""


Handler = Callable[[RemotingCommand, "Connection"], Awaitable[RemotingCommand | None]]


class Connection:
    _ids = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.id = next(self._ids)
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.remote = f"{peer[0]}:{peer[1]}"
        self.attributes: dict[str, Any] = {}
        self.inflight = 0
        self.closed = asyncio.Event()

    def send(self, cmd: RemotingCommand) -> None:
        if not self.writer.is_closing():
            self.writer.write(cmd.encode())

    async def drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            pass

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


class RemotingServer:
    def __init__(
        self,
        name: str,
        handlers: dict[int, Handler],
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_timeout: float = 120.0,
        max_inflight: int = 4096,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.name = name
        self.handlers = handlers
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout = idle_timeout
        self.max_inflight = max_inflight
        self.on_close = on_close
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, limit=1 << 20)
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer)
        self.connections.add(conn)
        decoder = FrameDecoder(self.max_frame_bytes)
        try:
            while True:
                try:
                    data = await asyncio.wait_for(reader.read(1 << 16), self.idle_timeout)
                except TimeoutError:
                    log.info("%s: closing idle connection %s", self.name, conn.remote)
                    break
                if not data:
                    break
                try:
                    commands = decoder.feed(data)
                except ProtocolError as exc:
                    log.warning("%s: closing %s: %s", self.name, conn.remote, exc)
                    conn.send(RemotingCommand(int(ResponseCode.SYSTEM_ERROR), 0, 1,
                                              {"remark": f"malformed frame: {exc}"}))
                    await conn.drain()
                    break
                for cmd in commands:
                    if cmd.is_response:
                        continue  # the broker does not call clients back (yet)
                    if conn.inflight >= self.max_inflight:
                        conn.send(cmd.response(ResponseCode.SYSTEM_BUSY, "too many requests in flight"))
                        continue
                    conn.inflight += 1
                    task = asyncio.ensure_future(self._handle(cmd, conn))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                if writer.transport.get_write_buffer_size() > (4 << 20):
                    await conn.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # shutdown: end the connection task normally (asyncio logs cancelled callback tasks in 3.11)
        finally:
            self.connections.discard(conn)
            conn.closed.set()
            conn.close()
            if self.on_close is not None:
                self.on_close(conn)

    async def _handle(self, cmd: RemotingCommand, conn: Connection) -> None:
        try:
            handler = self.handlers.get(cmd.code)
            if handler is None:
                resp: RemotingCommand | None = cmd.response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} is not supported")
            else:
                try:
                    resp = await handler(cmd, conn)
                except asyncio.CancelledError:
                    raise
                except BadRequest as exc:
                    resp = cmd.response(ResponseCode.BAD_REQUEST, str(exc))
                except Exception as exc:
                    log.exception("%s: handler for code %d failed", self.name, cmd.code)
                    resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            if resp is not None and not cmd.is_oneway:
                conn.send(resp)
        finally:
            conn.inflight -= 1
