"""Corking (``Connection.cork``): the answers to the requests of one read leave in one write, in order.

On a recording transport (every ``write`` / ``writelines`` call is kept), so the count of calls is exact:
- one request in a read: its answer is written at once, alone;
- several requests in one read: their small answers go out in one ``writelines``, in request order;
- a gather response among them writes what was held first, then itself, and the rest follow it;
- a big answer is not held (the high-water mark must see it), an answer from an awaitable handler comes after
  the read and is written when it is ready, a oneway request adds nothing, a closing transport gets nothing;
- through a real socket on both loops: a pipelined burst gets every answer, whole and in order."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.protocol.command import FLAG_ONEWAY
from broker_core.remoting.connection import CORK_MAX_BYTES, CORK_MAX_RESPONSES, Connection
from broker_core.remoting.server import GatherResponse, RemotingServer, _ServerProtocol
from tests.unit.remoting.loop_helpers import loop_factories, read_responses, run

PLAIN, BIG, GATHER, LATER = 7301, 7302, 7303, 7304


class RecordingTransport:
    """The transport methods the server uses; each write call is kept as ("write", [data]) or
    ("writelines", [data, ...])."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[bytes]]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", [bytes(data)]))

    def writelines(self, parts: Any) -> None:
        self.calls.append(("writelines", [bytes(p) for p in parts]))

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closing = True

    def opaques(self) -> list[list[int]]:
        """Per write call, the opaques of the frames it carried (gather bodies are raw bytes: skipped)."""
        from broker_core.protocol import FrameDecoder

        out = []
        for _, parts in self.calls:
            decoder = FrameDecoder(64 * 1024 * 1024)
            out.append([c.opaque for c in decoder.feed(b"".join(parts))])
        return out


def _handlers() -> dict[int, Any]:
    async def later(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        await asyncio.sleep(0)
        return cmd.response(ResponseCode.SUCCESS)

    return {
        PLAIN: lambda cmd, conn: cmd.response(ResponseCode.SUCCESS, body=b"p" * 10),
        BIG: lambda cmd, conn: cmd.response(ResponseCode.SUCCESS, body=b"b" * (CORK_MAX_BYTES + 1)),
        GATHER: lambda cmd, conn: GatherResponse(cmd.response(ResponseCode.SUCCESS), [memoryview(b"g" * 100)],
                                                 lambda: None),
        LATER: later,
    }


def _req(code: int, opaque: int, oneway: bool = False) -> bytes:
    return RemotingCommand(code, opaque, FLAG_ONEWAY if oneway else 0, {}, b"").encode()


def _protocol() -> tuple[_ServerProtocol, RecordingTransport]:
    server = RemotingServer("test", _handlers())
    proto = _ServerProtocol(server)
    transport = RecordingTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]  # a stand-in with the transport's methods
    return proto, transport


def _in_loop(body: Any) -> None:
    async def main() -> None:
        body()

    asyncio.run(main())


def test_one_request_is_answered_at_once_alone() -> None:
    def body() -> None:
        proto, transport = _protocol()
        proto.data_received(_req(PLAIN, 1))
        assert [name for name, _ in transport.calls] == ["write"]
        proto.data_received(_req(PLAIN, 2))
        assert transport.opaques() == [[1], [2]]

    _in_loop(body)


def test_the_answers_to_one_read_leave_in_one_write_in_order() -> None:
    def body() -> None:
        proto, transport = _protocol()
        proto.data_received(b"".join(_req(PLAIN, i) for i in range(1, 11)))
        assert [name for name, _ in transport.calls] == ["writelines"]
        assert transport.opaques() == [list(range(1, 11))]
        assert proto.conn is not None and proto.conn.corked is None  # uncorked after the read

    _in_loop(body)


def test_held_answers_are_bounded_in_number() -> None:
    def body() -> None:
        proto, transport = _protocol()
        n = 2 * CORK_MAX_RESPONSES + 3
        proto.data_received(b"".join(_req(PLAIN, i) for i in range(n)))
        assert [len(o) for o in transport.opaques()] == [CORK_MAX_RESPONSES, CORK_MAX_RESPONSES, 3]
        assert [o for call in transport.opaques() for o in call] == list(range(n))

    _in_loop(body)


def test_a_gather_or_big_answer_writes_what_was_held_first() -> None:
    def body() -> None:
        proto, transport = _protocol()
        proto.data_received(_req(PLAIN, 1) + _req(PLAIN, 2) + _req(GATHER, 3) + _req(PLAIN, 4) + _req(BIG, 5)
                            + _req(PLAIN, 6))
        assert transport.opaques() == [[1, 2], [3], [4], [5], [6]]
        assert [name for name, _ in transport.calls] == ["writelines", "writelines", "write", "write", "write"]
        assert transport.calls[1][1][1] == b"g" * 100  # the gather's view follows its head in the same call

    _in_loop(body)


def test_oneway_awaitable_and_closing() -> None:
    async def main() -> None:
        proto, transport = _protocol()
        proto.data_received(_req(PLAIN, 1, oneway=True) + _req(LATER, 2) + _req(PLAIN, 3))
        assert transport.opaques() == [[3]]  # the oneway request: nothing; the awaitable: not yet
        for _ in range(5):
            await asyncio.sleep(0)
        assert transport.opaques() == [[3], [2]]
        transport.closing = True
        proto.data_received(_req(PLAIN, 4) + _req(PLAIN, 5))
        assert transport.opaques() == [[3], [2]]

    asyncio.run(main())


@pytest.mark.parametrize("factory", loop_factories())
def test_a_pipelined_burst_gets_every_answer_in_order(factory: Any) -> None:
    async def main() -> None:
        server = RemotingServer("test", _handlers())
        port = await server.start("127.0.0.1", 0)
        try:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setblocking(False)
            codes = [(PLAIN, BIG, GATHER, LATER)[i % 7 % 4] for i in range(500)]
            await asyncio.get_running_loop().sock_sendall(sock, b"".join(
                _req(code, i) for i, code in enumerate(codes)))
            got = await read_responses(sock, len(codes))
            assert [r.opaque for r in got if codes[r.opaque] != LATER] == [
                i for i, code in enumerate(codes) if code != LATER]  # awaitables answer when ready
            assert sorted(r.opaque for r in got) == list(range(len(codes)))
            sizes = {PLAIN: 10, BIG: CORK_MAX_BYTES + 1, GATHER: 100, LATER: 0}
            assert all(len(r.body or b"") == sizes[codes[r.opaque]] for r in got)
            sock.close()
        finally:
            await server.close()

    run(factory, main())
