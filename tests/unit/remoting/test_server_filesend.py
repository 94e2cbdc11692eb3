"""File responses (``broker_core.remoting.filesend``: a file's range sent with ``sendfile`` after the frame's
header), in process on asyncio's loop and on uvloop: mixed with ordinary responses they arrive whole and in
order through a small receive buffer; a client that does not read is paused with at most ``MAX_QUEUED``
responses (and descriptors) waiting; a oneway request's file response is dropped; a connection lost mid-range
and a file shorter than its region close the connection and every descriptor, and the server serves others."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.protocol.command import FLAG_ONEWAY
from broker_core.remoting.server import MAX_QUEUED, Connection, FileRegion, FileResponse, RemotingServer
from tests.unit.remoting.loop_helpers import connect, loop_factories, read_responses, run, until

FILE, PLAIN = 7101, 7102
MIB = 1024 * 1024


def _open_fds(path: Path) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            continue
    return n


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "segment"
    content = os.urandom(8 * MIB)
    path.write_bytes(content)
    return path, content


def _server(path: Path) -> RemotingServer:
    def file_range(cmd: RemotingCommand, conn: Connection) -> FileResponse:
        offset, length = int(cmd.header["offset"]), int(cmd.header["length"])
        resp = cmd.response(ResponseCode.SUCCESS, header={"offset": offset})
        return FileResponse(resp, FileRegion(os.open(path, os.O_RDONLY), offset, length))

    def plain(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=bytes([cmd.opaque % 256]) * int(cmd.header["length"]))

    return RemotingServer("test", {FILE: file_range, PLAIN: plain}, write_buffer_high=512 * 1024,
                          write_buffer_low=128 * 1024)


def _req(code: int, opaque: int, offset: int, length: int, oneway: bool = False) -> bytes:
    return RemotingCommand(code, opaque, FLAG_ONEWAY if oneway else 0,
                           {"offset": str(offset), "length": str(length)}, b"").encode()


async def _read_to_eof(sock: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    out = bytearray()
    while data := await loop.sock_recv(sock, MIB):
        out += data
    return bytes(out)


@pytest.mark.parametrize("factory", loop_factories())
def test_file_and_plain_responses_arrive_whole_and_in_order(factory: Any, data: tuple[Path, bytes]) -> None:
    path, content = data

    async def main() -> None:
        server = _server(path)
        port = await server.start("127.0.0.1", 0)
        try:
            sock = await connect(port, 64 * 1024)  # small: the socket fills and senders wait for it
            asked: list[tuple[int, int, int]] = []
            for i in range(1, 61):
                code = PLAIN if i % 3 == 1 else FILE
                offset, length = (i * 37_001) % (6 * MIB), MIB if i % 3 == 0 else (200_000 if code == PLAIN else 100)
                asked.append((code, offset, length))
            await asyncio.get_running_loop().sock_sendall(sock, b"".join(
                _req(code, i, offset, length) for i, (code, offset, length) in enumerate(asked, 1)))
            responses = await read_responses(sock, len(asked))
            assert [r.opaque for r in responses] == list(range(1, len(asked) + 1))
            for r, (code, offset, length) in zip(responses, asked, strict=True):
                assert r.code == ResponseCode.SUCCESS
                want = content[offset:offset + length] if code == FILE else bytes([r.opaque % 256]) * length
                assert r.body == want, f"response {r.opaque}"
            await until(lambda: _open_fds(path) == 0, "every region's descriptor to be closed")
            sock.close()
        finally:
            await server.close()

    run(factory, main())


@pytest.mark.parametrize("factory", loop_factories())
def test_a_client_that_does_not_read_file_responses_is_paused(factory: Any, data: tuple[Path, bytes]) -> None:
    path, content = data
    n = 60

    async def main() -> None:
        server = _server(path)
        port = await server.start("127.0.0.1", 0)
        try:
            slow = await connect(port, 64 * 1024)
            await asyncio.get_running_loop().sock_sendall(slow, b"".join(
                _req(FILE, i, i * 1000, MIB) for i in range(1, n + 1)))
            await until(lambda: any(c.paused for c in server.connections), "the slow connection to be paused")
            conn = next(iter(server.connections))
            assert conn.backlog and len(conn.outbox) == MAX_QUEUED and conn.sender is not None
            assert _open_fds(path) == MAX_QUEUED + 1  # the queued responses and the one being sent
            assert conn.write_buffer_size > MAX_QUEUED * MIB

            responses = await read_responses(slow, n)  # reading drains it: everything, in order
            assert [r.opaque for r in responses] == list(range(1, n + 1))
            assert all(r.body == content[r.opaque * 1000:r.opaque * 1000 + MIB] for r in responses)
            assert conn.pauses >= 1 and not conn.paused and not conn.backlog and not conn.outbox
            await until(lambda: _open_fds(path) == 0, "every region's descriptor to be closed")
            slow.close()
        finally:
            await server.close()

    run(factory, main())


@pytest.mark.parametrize("factory", loop_factories())
def test_lost_connections_short_files_and_oneway_requests_close_every_descriptor(
        factory: Any, data: tuple[Path, bytes]) -> None:
    path, content = data

    async def main() -> None:
        server = _server(path)
        port = await server.start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        try:
            gone = await connect(port, 64 * 1024)  # asks for 8 MiB, takes a little, leaves
            await loop.sock_sendall(gone, b"".join(_req(FILE, i, 0, 2 * MIB) for i in range(1, 5)))
            assert await loop.sock_recv(gone, 1000)
            await until(lambda: _open_fds(path) >= 1, "the server to be sending")
            gone.close()
            await until(lambda: not server.connections and _open_fds(path) == 0,
                         "the lost connection's descriptors to be closed")

            short = await connect(port, MIB)  # the region runs past the file's end: the frame cannot be whole
            await loop.sock_sendall(short, _req(FILE, 1, len(content) - 1000, 5000))
            got = await _read_to_eof(short)
            assert len(got) < 5000 and got.endswith(content[-1000:])  # closed mid-frame, never padded
            short.close()
            await until(lambda: not server.connections and _open_fds(path) == 0,
                         "the short file's connection to be closed")

            sock = await connect(port, MIB)  # oneway: no answer, descriptor closed; the server still serves
            await loop.sock_sendall(sock, _req(FILE, 1, 0, 100, oneway=True) + _req(FILE, 2, 5, 100))
            (resp,) = await read_responses(sock, 1)
            assert resp.opaque == 2 and resp.body == content[5:105]
            await until(lambda: _open_fds(path) == 0, "the oneway response's descriptor to be closed")
            sock.close()
        finally:
            await server.close()

    run(factory, main())
