"""RemotingServer: accepts connections, decodes frames, runs handlers, writes responses.

Handlers take ``(command, connection)`` and return a response, ``None`` (no response), or an awaitable of
either. A handler that can answer at once answers in the same event-loop turn as the bytes arrived (no
task per request); only awaitables (long polling, waiting for a group commit) become tasks.

Guarantees: a malformed or oversized frame closes only that connection, without a reply, logged once (as
RocketMQ's Netty decoder does); an unknown code gets REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark; a
handler that raises :class:`BadRequest` or any other exception gets SYSTEM_ERROR with the error text; oneway
requests never get a reply; responses use the request's serialize type; a connection silent for
``idle_timeout`` seconds is closed (half-open peers); more than ``max_inflight`` pending awaitables on one
connection get SYSTEM_BUSY. Other connections are never affected.

Back-pressure (RocketMQ's ``writeBufferHighWaterMark``/``writeBufferLowWaterMark``, Netty's channel
writability): each connection's transport has these write-buffer limits. When its unsent output passes the
high-water mark the loop calls ``pause_writing``; the connection then stops reading (``pause_reading``) and
keeps the requests already decoded from the last read in a queue, unanswered. When the output drains under
the low-water mark (``resume_writing``) the queued requests run, in order, and reading resumes. So a client
that never reads its responses costs the broker at most the high-water mark plus one response, plus the
requests of one read and the awaitables already in flight (at most ``max_inflight``). asyncio's and uvloop's
transports both implement these limits and callbacks.

File responses (:class:`FileResponse`, ``filesend``): a handler may answer with an open file's range, which the
kernel sends (``sendfile``) after the frame's header, without copying it into Python. Responses still leave in
the order they are sent: later ones wait in the connection's outbox until the range is out, and the connection
stops reading once :data:`MAX_QUEUED` of them wait (a queued file response holds an open descriptor). A file
response dropped (oneway request, closed connection) closes its descriptor.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Union, cast

from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand, ResponseCode
from broker_core.protocol.command import DEFAULT_MAX_FRAME_BYTES, FLAG_ONEWAY, FLAG_RESPONSE, LARGE_BODY_BYTES
from broker_core.protocol.fields import BadRequest
from broker_core.remoting.connection import MAX_QUEUED, Connection, drop_response
from broker_core.remoting.filesend import FileRegion, FileResponse, GatherResponse
from broker_core.remoting.receive import BytesReceiver

__all__ = ["MAX_QUEUED", "BadRequest", "Connection", "FileRegion", "FileResponse", "GatherResponse", "Handler",
           "RemotingServer", "Response", "RpcHook"]

log = logging.getLogger(__name__)


# bytes: a response frame the handler encoded itself (a hot path's answer, written as it is)
Response = Union[RemotingCommand, FileResponse, GatherResponse, bytes, None]  # noqa: UP007 - used at runtime in a type alias
Handler = Callable[[RemotingCommand, "Connection"], Union[Response, Awaitable[Response]]]  # noqa: UP007
# Runs before every handler (unknown codes too): None lets the request through, a command answers it instead.
RpcHook = Callable[[RemotingCommand, "Connection"], Response]


# Reads land here (asyncio.BufferedProtocol), one loop-wide buffer shared by every connection of a server: a read
# is copied out (buffer_updated) before the next one starts, as a plain Protocol's transport does with its own.
READ_BUFFER_BYTES = 256 * 1024


class _ServerProtocol(asyncio.BufferedProtocol):
    """A connection's reads: into the server's read buffer, handed on as bytes (``data_received``), except the body
    of a large frame (``FrameDecoder.body``), which the socket fills in place: a 4 MiB message is copied once from
    the kernel into the bytes the store appends, not through the loop's buffer, a growing buffer and a copy out."""

    loop: asyncio.AbstractEventLoop  # the serving loop, from connection_made on

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_bytes, BytesReceiver)
        self.conn: Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not an asyncio.Transport subclass, but has the same methods)
        self.conn = Connection(cast(asyncio.Transport, transport))
        self.loop = asyncio.get_running_loop()  # kept: get_running_loop() makes a getpid() system call each time
        self.conn.last_activity = self.loop.time()
        self.conn.on_output = self._sync_reading
        if self.server.write_buffer_high > 0:
            self.conn.transport.set_write_buffer_limits(self.server.write_buffer_high, self.server.write_buffer_low)
        self.server.connections.add(self.conn)

    def get_buffer(self, sizehint: int) -> Any:
        body = self.decoder.body
        return self.server.read_buffer if body is None else body.into()

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self.decoder
        conn = self.conn
        assert conn is not None
        if decoder.body is None:
            read = self.server.read_buffer[:nbytes]
            try:  # a read starting a large frame: its body opened from the read buffer (one copy), then read into
                if nbytes > LARGE_BODY_BYTES and decoder.open_body(read):
                    conn.last_activity = self.loop.time()
                    return
            except ProtocolError as exc:
                self._malformed(exc)
                return
            self.data_received(read.tobytes())
            return
        conn.last_activity = self.loop.time()
        try:
            commands = decoder.received(nbytes)
        except ProtocolError as exc:  # the header of the completed frame does not parse
            self._malformed(exc)
            return
        if commands:
            self._dispatch(commands)

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        assert conn is not None
        conn.last_activity = self.loop.time()
        lane = self.server.lane
        if (lane is not None and not self.decoder.buffered and conn.sender is None and not conn.outbox
                and not conn.backlog and not conn.transport_full and not conn.transport.is_closing()):
            try:
                answer = lane(data, conn)
            except Exception as exc:  # noqa: BLE001 - as a handler that raised: SYSTEM_ERROR, never a second try
                self._lane_failed(data, exc)
                return
            if answer is not None:
                conn.transport.write(answer)
                return
        commands = self._decode(data)
        if commands is not None:
            self._dispatch(commands)

    def _dispatch(self, commands: list[RemotingCommand]) -> None:
        """Run the requests (and take the responses) one read completed, in order."""
        conn = self.conn
        assert conn is not None
        if conn.backlog or conn.transport_full or len(conn.outbox) >= MAX_QUEUED:  # conn.paused, inlined
            for cmd in commands:
                if cmd.flags & FLAG_RESPONSE:
                    conn.response_arrived(cmd)  # answers to the server's own requests are never held back
                else:
                    conn.backlog.append(cmd)
            self._run_backlog()
            return
        dispatch = self.server.dispatch  # the common case: nothing queued, run the requests as they come
        if len(commands) == 1 and not conn.transport.is_closing():
            cmd = commands[0]
            if not cmd.flags & FLAG_RESPONSE:
                dispatch(cmd, conn)
            else:
                conn.response_arrived(cmd)
            return
        conn.cork()  # several requests in one read: their answers leave in one write
        try:
            for i, cmd in enumerate(commands):
                if conn.paused or conn.transport.is_closing():
                    for c in commands[i:]:
                        if c.is_response:
                            conn.response_arrived(c)
                        else:
                            conn.backlog.append(c)
                    break
                if not cmd.flags & FLAG_RESPONSE:
                    dispatch(cmd, conn)
                else:
                    conn.response_arrived(cmd)
        finally:
            conn.uncork()

    def _decode(self, data: bytes) -> list[RemotingCommand] | None:
        """The commands ``data`` completes, or None when it is malformed (the connection is then closed, logged)."""
        try:
            return self.decoder.feed(data)
        except ProtocolError as exc:
            self._malformed(exc)
            return None

    def _malformed(self, exc: ProtocolError) -> None:
        conn = self.conn
        assert conn is not None
        log.warning("%s: malformed frame from %s, closing the connection: %s", self.server.name, conn.remote, exc)
        conn.close()

    def _lane_failed(self, data: bytes, exc: Exception) -> None:
        """The lane raised (it may have stored the message): answered as :meth:`RemotingServer.dispatch` answers a
        handler that raised, from the frame decoded the general way (which closes the connection if it is bad)."""
        conn = self.conn
        assert conn is not None
        log.error("%s: the send lane failed", self.server.name, exc_info=exc)
        for cmd in self._decode(data) or ():
            if not cmd.flags & (FLAG_RESPONSE | FLAG_ONEWAY):
                conn.send(cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"))

    def _run_backlog(self) -> None:
        """Dispatch queued requests in order until the connection pauses (its output backs up)."""
        conn = self.conn
        assert conn is not None
        while conn.backlog and not conn.paused and not conn.transport.is_closing():
            self.server.dispatch(conn.backlog.popleft(), conn)

    def _sync_reading(self) -> None:
        """Pause reading when the connection is paused; otherwise run what was queued, then read again."""
        conn = self.conn
        if conn is None or conn.transport.is_closing():
            return
        if conn.paused:
            if not conn.reading_paused:
                conn.reading_paused = True
                conn.pauses += 1
                conn.transport.pause_reading()
                log.debug("%s: %s is not reading its responses (%d bytes unsent): paused reading",
                          self.server.name, conn.remote, conn.write_buffer_size)
            return
        self._run_backlog()
        if conn.reading_paused and not conn.paused and not conn.transport.is_closing():
            conn.reading_paused = False
            conn.transport.resume_reading()

    def pause_writing(self) -> None:
        if self.conn is not None and not self.conn.transport_full:
            self.conn.transport_full = True
            self._sync_reading()

    def resume_writing(self) -> None:
        if self.conn is not None and self.conn.transport_full:
            self.conn.transport_full = False
            self._sync_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        if conn is None:
            return
        self.server.connections.discard(conn)
        conn.backlog.clear()
        conn.abort_output()
        conn.fail_pending()
        conn.closed.set()
        if self.server.on_close is not None:
            self.server.on_close(conn)


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
        rpc_hook: RpcHook | None = None,
        write_buffer_high: int = 4 * 1024 * 1024,
        write_buffer_low: int = 1024 * 1024,
    ) -> None:
        self.name = name
        self.handlers = handlers
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout = idle_timeout
        self.max_inflight = max_inflight
        self.on_close = on_close
        self.rpc_hook = rpc_hook
        # A hot path ahead of decoding: (one read's bytes, its connection) -> its whole answer frame, or None to
        # decode and dispatch them as usual. Given only reads while nothing waits to be written on the connection;
        # it must answer only what the handlers would answer the same (the rpc hook letting it through).
        self.lane: Callable[[bytes, Connection], bytes | None] | None = None
        if write_buffer_high > 0 and not 0 <= write_buffer_low <= write_buffer_high:
            raise ValueError(f"write buffer low-water mark {write_buffer_low} must be 0..{write_buffer_high}")
        self.write_buffer_high = write_buffer_high  # 0: the loop's defaults (64 KiB), still paused past them
        self.write_buffer_low = write_buffer_low
        self.connections: set[Connection] = set()
        self.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))  # every connection's reads (_ServerProtocol)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._extra: list[asyncio.base_events.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> int:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(lambda: _ServerProtocol(self), host, port)
        self._watchdog = asyncio.ensure_future(self._close_idle())
        return self._server.sockets[0].getsockname()[1]

    async def listen_also(self, host: str, port: int) -> int:
        """Serve the same handlers on a second address (the broker's VIP port); returns the bound port."""
        assert self.loop is not None, "start() first"
        server = await self.loop.create_server(lambda: _ServerProtocol(self), host, port)
        self._extra.append(server)
        return server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for extra in self._extra:
            extra.close()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    async def _close_idle(self) -> None:
        period = max(0.05, min(self.idle_timeout / 4, 5.0))
        while True:
            await asyncio.sleep(period)
            deadline = asyncio.get_running_loop().time() - self.idle_timeout
            for conn in list(self.connections):
                if conn.last_activity < deadline and conn.inflight == 0:
                    log.info("%s: closing idle connection %s", self.name, conn.remote)
                    conn.close()

    def dispatch(self, cmd: RemotingCommand, conn: Connection) -> None:
        if self.rpc_hook is not None:  # e.g. the broker's ACL: a refusal answers instead of the handler
            try:
                refusal = self.rpc_hook(cmd, conn)
            except Exception as exc:  # a failing check refuses rather than letting the request through
                log.exception("%s: the request hook failed for code %d", self.name, cmd.code)
                refusal = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            if refusal is not None:
                if not cmd.is_oneway:
                    conn.send(refusal)
                return
        handler = self.handlers.get(cmd.code)
        if handler is None:
            if not cmd.is_oneway:
                conn.send(cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f" request type {cmd.code} not supported"))
            return
        try:
            result = handler(cmd, conn)
        except BadRequest as exc:
            result = cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:  # one bad request must not take the server down
            log.exception("%s: handler for code %d failed", self.name, cmd.code)
            result = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if (result is not None and type(result) is not RemotingCommand and type(result) is not bytes
                and inspect.isawaitable(result)):
            if conn.inflight >= self.max_inflight:
                if inspect.iscoroutine(result):
                    result.close()
                conn.send(cmd.response(ResponseCode.SYSTEM_BUSY, "too many requests in flight"))
                return
            conn.inflight += 1
            task = asyncio.ensure_future(self._finish(cmd, conn, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif result is not None and not cmd.flags & FLAG_ONEWAY:  # _answer(cmd, conn, result), inlined
            conn.send(result)
        elif result is not None:
            drop_response(result)

    async def _finish(self, cmd: RemotingCommand, conn: Connection, pending: Awaitable[Response]) -> None:
        try:
            try:
                resp = await pending
            except asyncio.CancelledError:
                return
            except BadRequest as exc:
                resp = cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            except Exception as exc:  # one bad request must not take the server down
                log.exception("%s: handler for code %d failed", self.name, cmd.code)
                resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            _answer(cmd, conn, resp)
        finally:
            conn.inflight -= 1


def _answer(cmd: RemotingCommand, conn: Connection, resp: Response) -> None:
    """Send ``resp`` unless the request was oneway (a dropped response releases what it holds)."""
    if resp is None:
        return
    if not cmd.is_oneway:
        conn.send(resp)
    else:
        drop_response(resp)
