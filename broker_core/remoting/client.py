"""RemotingClient: one connection per address, many requests in flight on it (matched by opaque).

All I/O runs on one background event loop thread per process (:func:`client_loop`), so synchronous SDK
calls (``invoke_sync``) and ``async`` callers share connections. A lost connection fails every request
waiting on it with ``ConnectionError``; the next request reconnects.

A request the server sends on a connection (notifications, and RocketMQ's broker-to-client calls such as
GET_CONSUMER_RUNNING_INFO) goes to ``on_request``; what it returns (a response, or an awaitable of one) is written
back on the same connection with the request's opaque, unless the request was oneway.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, Union

from broker_core.codec.wire import FLAG_RESPONSE, SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand
from broker_core.protocol.acl import SessionCredentials, sign_command
from broker_core.protocol.command import LARGE_BODY_BYTES
from broker_core.remoting import loops

log = logging.getLogger(__name__)
T = TypeVar("T")
# (server address, request) -> its response, an awaitable of it, or None (no answer: a notification)
RequestHandler = Callable[[str, RemotingCommand],
                          Union[RemotingCommand, Awaitable[RemotingCommand | None], None]]  # noqa: UP007


class RemotingTimeout(TimeoutError):
    pass


def default_serialize_type() -> int:
    """The header serialization our clients send: ``BROKER_CORE_SERIALIZE_TYPE`` = ``JSON`` or ``ROCKETMQ``
    (binary, the default: measured faster end to end, see README "Wire protocol"). Servers answer in kind."""
    name = os.environ.get("BROKER_CORE_SERIALIZE_TYPE", "ROCKETMQ").strip().upper()
    if name not in ("JSON", "ROCKETMQ"):
        raise ValueError(f"BROKER_CORE_SERIALIZE_TYPE must be JSON or ROCKETMQ, got {name!r}")
    return SERIALIZE_JSON if name == "JSON" else SERIALIZE_ROCKETMQ


class _LoopThread:
    def __init__(self) -> None:
        self.loop = loops.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="broker-core-client-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


_loop_lock = threading.Lock()
_loop: _LoopThread | None = None


def client_loop() -> asyncio.AbstractEventLoop:
    """The process-wide client event loop (started on first use)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = _LoopThread()
        return _loop.loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the client loop and wait for it from a plain thread."""
    loop = client_loop()
    try:
        if asyncio.get_running_loop() is loop:
            raise RuntimeError("run_sync called on the client loop itself; await the coroutine instead")
    except RuntimeError as exc:
        if "client loop itself" in str(exc):
            raise
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


class _Channel(asyncio.Protocol):
    """One connection: requests written on the transport, responses matched to their futures by opaque as
    they are decoded (a protocol, not streams: no reader task, no copy through a StreamReader buffer)."""

    loop: asyncio.AbstractEventLoop  # the channel's loop, from connection_made on

    def __init__(self, addr: str, on_request: RequestHandler | None = None) -> None:
        self.addr = addr
        self.on_request = on_request
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.decoder = FrameDecoder()
        self.lost = False
        self.replies: set[asyncio.Task[None]] = set()  # answers to server requests still being computed

    @property
    def alive(self) -> bool:
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        self.loop = asyncio.get_running_loop()  # kept: get_running_loop() makes a getpid() system call each time

    def data_received(self, data: bytes) -> None:
        try:
            commands = self.decoder.feed(data)
        except ProtocolError as exc:
            self._fail(ConnectionError(f"connection to {self.addr} failed: {exc}"))
            return
        pending = self.pending
        for cmd in commands:
            if not cmd.flags & FLAG_RESPONSE:
                if self.on_request is not None:  # server-initiated: notifications, broker-to-client calls
                    self._answer(cmd, self.on_request(self.addr, cmd))
                continue
            fut = pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)

    def _answer(self, cmd: RemotingCommand, reply: RemotingCommand | Awaitable[RemotingCommand | None] | None) -> None:
        if reply is None:
            return
        if inspect.isawaitable(reply):
            task = asyncio.ensure_future(self._answer_later(cmd, reply))
            self.replies.add(task)
            task.add_done_callback(self.replies.discard)
            return
        assert isinstance(reply, RemotingCommand)
        if not cmd.is_oneway and self.alive:
            reply.opaque, reply.serialize_type = cmd.opaque, cmd.serialize_type
            reply.flags |= FLAG_RESPONSE
            self.write(reply.encode())

    async def _answer_later(self, cmd: RemotingCommand, reply: Awaitable[RemotingCommand | None]) -> None:
        try:
            resp = await reply
        except Exception as exc:  # the server gets SYSTEM_ERROR with the error, as a Java client answers
            log.exception("answering server request %d failed", cmd.code)
            resp = cmd.response(1, f"{type(exc).__name__}: {exc}")
        self._answer(cmd, resp)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost fails what waits

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"connection to {self.addr} {'failed: ' + str(exc) if exc else 'closed'}"))

    def _fail(self, err: BaseException) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def send(self, cmd: RemotingCommand) -> None:
        """Write ``cmd``'s frame; a large body goes in one gather write behind its head (uvloop's ``writelines`` is
        a ``writev``), not copied into a new frame of its size."""
        assert self.transport is not None
        if len(cmd.body) > LARGE_BODY_BYTES:
            self.transport.writelines(cmd.encode_parts())
        else:
            self.transport.write(cmd.encode())

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _expire(fut: asyncio.Future[RemotingCommand], code: int, addr: str, timeout: float) -> None:
    if not fut.done():  # the error is built only when it happens, not for every request
        fut.set_exception(RemotingTimeout(f"request {code} to {addr} timed out after {timeout:.1f}s"))


class RemotingClient:
    def __init__(self, connect_timeout: float = 3.0,
                 on_request: RequestHandler | None = None,
                 serialize_type: int | None = None, credentials: SessionCredentials | None = None) -> None:
        """``credentials``: sign every request as RocketMQ's ``AclClientRPCHook`` (brokers with ACL on need it;
        name servers ignore the fields)."""
        self.connect_timeout = connect_timeout
        self.serialize_type = default_serialize_type() if serialize_type is None else serialize_type
        self.credentials = credentials
        self.on_request = on_request
        self._channels: dict[str, _Channel] = {}
        self._connecting: dict[str, asyncio.Future[_Channel]] = {}
        self._opaque = itertools.count(1)

    async def _channel(self, addr: str) -> _Channel:
        ch = self._channels.get(addr)
        if ch is not None and ch.alive:
            return ch
        fut = self._connecting.get(addr)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._connecting[addr] = fut
            try:
                host, _, port = addr.rpartition(":")
                loop = asyncio.get_running_loop()
                _, channel = await loops.within(
                    loop.create_connection(lambda: _Channel(addr, self.on_request), host, int(port)),
                    self.connect_timeout)
                self._channels[addr] = channel
                fut.set_result(channel)
            except (OSError, TimeoutError, ValueError) as exc:
                fut.set_exception(ConnectionError(f"cannot connect to {addr}: {exc}"))
                fut.exception()
            finally:
                self._connecting.pop(addr, None)
        return await fut

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        ch = self._channels.get(addr)
        if ch is None or not ch.alive:
            ch = await self._channel(addr)
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.serialize_type = self.serialize_type
        if self.credentials is not None:
            sign_command(cmd, self.credentials)
        loop = ch.loop
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        ch.pending[cmd.opaque] = fut
        ch.send(cmd)
        # one timer on the future itself (asyncio.wait_for wraps it in a task-like waiter: several times the cost)
        timer = loop.call_later(timeout, _expire, fut, cmd.code, addr, timeout)
        try:
            return await fut
        except RemotingTimeout:
            ch.pending.pop(cmd.opaque, None)
            raise
        finally:
            timer.cancel()

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        ch = await self._channel(addr)
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.serialize_type = self.serialize_type
        cmd.flags |= 0x2
        if self.credentials is not None:
            sign_command(cmd, self.credentials)
        ch.send(cmd)

    def invoke_sync(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        return run_sync(self.invoke(addr, cmd, timeout), timeout + self.connect_timeout + 1)

    def close_channel(self, addr: str) -> None:
        ch = self._channels.pop(addr, None)
        if ch is not None:
            ch.close()

    async def close(self) -> None:
        for ch in list(self._channels.values()):
            ch.close()
        self._channels.clear()
