"""The server asking a client over the client's own connection (``Connection.request``, RocketMQ's
``invokeSync(channel, ...)``), in process on both loops with our RemotingClient answering: the answer comes back by
opaque even among the client's own requests; a client that does not answer times out and its late answer is
dropped; a connection lost while waiting fails the wait with ConnectionError; an answering handler that raises
sends SYSTEM_ERROR back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.server import Connection, RemotingServer
from tests.unit.remoting.loop_helpers import loop_factories, run, until

ASK, QUESTION = 7401, 7402


@pytest.mark.parametrize("factory", loop_factories())
def test_request_answered_timed_out_and_lost(factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    async def main() -> None:
        outcomes: list[Any] = []
        conns: list[Connection] = []

        async def ask(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            conns.append(conn)
            try:
                answer = await conn.request(RemotingCommand.request(QUESTION, {"q": cmd.header["q"]}),
                                            float(cmd.header["timeout"]))
                outcomes.append((answer.code, answer.remark, answer.is_response))
            except (TimeoutError, ConnectionError) as exc:
                outcomes.append(type(exc).__name__)
            return cmd.response(ResponseCode.SUCCESS)

        server = RemotingServer("t", {ASK: ask})
        port = await server.start("127.0.0.1", 0)
        held: list[asyncio.Future[RemotingCommand]] = []

        def answer(addr: str, cmd: RemotingCommand) -> Any:
            q = cmd.header.get("q")
            if q == "silent":
                fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
                held.append(fut)
                return fut  # answered only after the server gave up
            if q == "raise":
                raise_later: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
                raise_later.set_exception(RuntimeError("no running info here"))
                return raise_later
            return cmd.response(ResponseCode.SUCCESS, f"answer to {q}")

        client = RemotingClient(on_request=answer)
        addr = f"127.0.0.1:{port}"
        try:
            await client.invoke(addr, RemotingCommand.request(ASK, {"q": "one", "timeout": "5"}), 10)
            assert outcomes == [(0, "answer to one", True)]
            await client.invoke(addr, RemotingCommand.request(ASK, {"q": "raise", "timeout": "5"}), 10)
            assert outcomes[-1] == (ResponseCode.SYSTEM_ERROR, "RuntimeError: no running info here", True)
            await client.invoke(addr, RemotingCommand.request(ASK, {"q": "silent", "timeout": "0.2"}), 10)
            assert outcomes[-1] == "TimeoutError"
            held[0].set_result(RemotingCommand.request(0))  # the late answer: dropped, nothing breaks
            await client.invoke(addr, RemotingCommand.request(ASK, {"q": "two", "timeout": "5"}), 10)
            assert outcomes[-1] == (0, "answer to two", True)
            assert not conns[0].pending
            # the connection is lost while the server waits
            waiting = asyncio.ensure_future(
                client.invoke(addr, RemotingCommand.request(ASK, {"q": "silent", "timeout": "30"}), 30))
            await until(lambda: len(held) == 2 and bool(conns[-1].pending), "the server to wait")
            client.close_channel(addr)
            await until(lambda: len(outcomes) == 5, "the wait to fail")
            assert outcomes[-1] == "ConnectionError"
            with pytest.raises(ConnectionError):
                await waiting
        finally:
            await client.close()
            await server.close()

    run(factory, main())
