"""Helpers the in-process server tests share: both event loops as parameters, running a coroutine on one,
waiting for a condition, a raw client socket with a chosen receive buffer, and reading whole responses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from broker_core.protocol import FrameDecoder, RemotingCommand

MIB = 1024 * 1024


def loop_factories() -> list[Any]:
    """asyncio's loop, and uvloop's when installed, as pytest parameters."""
    out = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
    except ImportError:
        return out
    return [*out, pytest.param(uvloop.new_event_loop, id="uvloop")]


def run(factory: Callable[[], asyncio.AbstractEventLoop], main: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


async def until(cond: Callable[[], bool], what: str) -> None:
    for _ in range(3000):  # bounds a hang only
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def connect(port: int, rcvbuf: int) -> socket.socket:
    """A non-blocking client socket with a ``rcvbuf``-byte receive buffer (small: the server's output backs up)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


async def read_responses(sock: socket.socket, count: int) -> list[RemotingCommand]:
    """The next ``count`` whole commands on ``sock``; fails if the server closes first."""
    loop = asyncio.get_running_loop()
    decoder = FrameDecoder(64 * MIB)
    got: list[RemotingCommand] = []
    while len(got) < count:
        data = await loop.sock_recv(sock, MIB)
        assert data, "server closed the connection"
        got.extend(decoder.feed(data))
    return got
