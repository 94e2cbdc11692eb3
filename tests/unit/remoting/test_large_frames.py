"""Large frames (protocol/command.py ``FrameDecoder.body``, the server's ``asyncio.BufferedProtocol`` reads, the
client's gather writes): a frame whose body arrives over several reads is received into one bytes object of the
body's size, and decodes to the same command however the bytes are split, with the C and the pure receiver alike;
an oversized or malformed frame fails as before (ProtocolError; the server closes that connection only)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from typing import Any

import pytest

from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand, ResponseCode, command
from broker_core.protocol.command import LARGE_BODY_BYTES
from broker_core.remoting import receive
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.server import Connection, RemotingServer
from tests.unit.remoting.loop_helpers import MIB, loop_factories, read_responses, run, until

RECEIVERS = [pytest.param(receive.PyBytesReceiver, id="pure")]
if receive.BytesReceiver is not receive.PyBytesReceiver:
    RECEIVERS.append(pytest.param(receive.BytesReceiver, id="native"))


@pytest.fixture(params=RECEIVERS)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each receiver, bodies over 16 bytes received in place (small frames can then be split at every boundary)."""
    monkeypatch.setattr(command, "LARGE_BODY_BYTES", 16)
    return request.param


def frames() -> tuple[bytes, list[RemotingCommand]]:
    cmds = [RemotingCommand.request(310, {"topic": "T", "n": "1"}, bytes(range(256)) * 2),
            RemotingCommand.request(11, {"x": "y"}, b""),
            RemotingCommand.request(310, {"topic": "U"}, b"tail body of some length"),
            RemotingCommand.request(10, {}, os.urandom(100))]
    cmds[2].serialize_type = 0  # a JSON header among binary ones
    data = b"".join(c.encode() for c in cmds)
    return data, [FrameDecoder().feed(c.encode())[0] for c in cmds]


def test_every_split_in_two_decodes_the_same(kind: Any) -> None:
    data, want = frames()
    for k in range(len(data) + 1):
        dec = FrameDecoder(receiver=kind)
        got = dec.feed(data[:k]) + dec.feed(data[k:])
        assert got == want, k
        assert dec.buffered == 0 and dec.body is None


def test_every_split_in_three_around_the_first_frame_decodes_the_same(kind: Any) -> None:
    data, want = frames()
    first = len(want[0].encode())
    for i in range(0, first + 20, 3):
        for j in range(i, first + 40):
            dec = FrameDecoder(receiver=kind)
            got = dec.feed(data[:i]) + dec.feed(data[i:j]) + dec.feed(data[j:])
            assert got == want, (i, j)


@pytest.mark.parametrize("opened", [False, True], ids=["fed", "open_body"])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_reads_into_the_body_decode_the_same(kind: Any, chunk: int, opened: bool) -> None:
    """As the server's BufferedProtocol: reads go into ``body.into()`` while a body is open, else are fed."""
    data, want = frames()
    dec, got, pos = FrameDecoder(receiver=kind), [], 0
    while pos < len(data):
        if dec.body is not None:
            target = memoryview(dec.body.into())
            n = min(chunk, len(target), len(data) - pos)
            target[:n] = data[pos:pos + n]
            target.release()
            got += dec.received(n)
        else:
            n = min(chunk, len(data) - pos)
            if not (opened and dec.open_body(data[pos:pos + n])):  # the server opens a large frame from its read
                got += dec.feed(data[pos:pos + n])
        pos += n
    assert got == want
    assert dec.buffered == 0


def test_a_large_body_is_one_receiver_of_its_size() -> None:
    cmd = RemotingCommand.request(310, {"topic": "T"}, os.urandom(3 * LARGE_BODY_BYTES))
    frame = cmd.encode()
    dec = FrameDecoder(receiver=receive.BytesReceiver)
    assert dec.feed(frame[:1000]) == []
    assert dec.body is not None and dec.body.size == len(cmd.body) and dec.buffered == 1000
    assert dec.feed(frame[1000:-1]) == [] and dec.buffered == len(frame) - 1
    (got,) = dec.feed(frame[-1:] + frame[:10])  # the next frame's head follows
    assert got.body == cmd.body and type(got.body) is bytes and dec.buffered == 10 and dec.body is None
    plain = FrameDecoder()  # no receiver given (the protocol layer does no I/O of its own): buffered as before
    assert plain.feed(frame[:1000]) == [] and not plain.open_body(frame[:1000]) and plain.body is None
    assert plain.feed(frame[1000:]) == [got]


def test_a_frame_over_the_maximum_fails_before_anything_of_its_size() -> None:
    cmd = RemotingCommand.request(310, {"topic": "T"}, bytes(2 * MIB))
    for start in (FrameDecoder.feed, FrameDecoder.open_body):
        dec = FrameDecoder(MIB, receive.BytesReceiver)
        with pytest.raises(ProtocolError, match="exceeds the limit"):
            start(dec, cmd.encode()[:4096])
        assert dec.body is None


def test_a_large_frame_whose_header_does_not_parse_fails_when_complete(kind: Any) -> None:
    body = b"b" * 100
    header = b"{not json"
    frame = (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body
    dec = FrameDecoder(receiver=kind)
    assert dec.feed(frame[:30]) == [] and dec.body is not None
    with pytest.raises(ProtocolError, match="JSON"):
        dec.feed(frame[30:])


def test_encode_parts_join_to_the_frame() -> None:
    for n in (0, LARGE_BODY_BYTES, LARGE_BODY_BYTES + 1, 5 * MIB):
        for st in (0, 1):
            cmd = RemotingCommand.request(310, {"topic": "T", "k": "v"}, os.urandom(n))
            cmd.serialize_type = st
            parts = cmd.encode_parts()
            assert b"".join(parts) == cmd.encode()
            assert len(parts) == (2 if n > LARGE_BODY_BYTES else 1)


@pytest.mark.parametrize("factory", loop_factories())
def test_the_server_takes_large_frames_in_pieces_and_closes_on_an_oversized_one(
        factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    """4 MiB bodies through the server's reads (the client's gather writes, and a raw socket writing odd pieces):
    the handler sees the exact bodies; a frame over the server's maximum closes that connection only."""
    async def main() -> None:
        seen: list[bytes] = []

        def echo(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            seen.append(cmd.body)
            return cmd.response(ResponseCode.SUCCESS, str(len(cmd.body)), body=cmd.body[:8])

        server = RemotingServer("t", {310: echo}, max_frame_bytes=5 * MIB)
        port = await server.start("127.0.0.1", 0)
        client = RemotingClient()
        try:
            bodies = [os.urandom(4 * MIB), os.urandom(LARGE_BODY_BYTES + 3), os.urandom(100)]
            resps = await asyncio.gather(*(client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(
                310, {"i": str(i)}, b), 10) for i, b in enumerate(bodies)))
            assert [r.remark for r in resps] == [str(len(b)) for b in bodies]
            assert sorted(seen, key=len) == sorted(bodies, key=len)
            seen.clear()

            loop = asyncio.get_running_loop()
            sock = socket.socket()
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", port))
            cmds = [RemotingCommand.request(310, {"n": str(i)}, os.urandom(n)) for i, n in
                    enumerate((3 * MIB + 7, 10, 200_000))]
            for c in cmds:
                c.opaque = 1 + len(seen)
            data = b"".join(c.encode() for c in cmds)
            pos, step = 0, 1
            while pos < len(data):  # pieces of growing odd sizes, so reads end anywhere in heads and bodies
                await loop.sock_sendall(sock, data[pos:pos + step])
                pos += step
                step = step * 3 + 1
            got = await read_responses(sock, len(cmds))
            assert [r.remark for r in got] == [str(len(c.body)) for c in cmds]
            assert seen == [c.body for c in cmds]

            too_big = RemotingCommand.request(310, {}, bytes(5 * MIB)).encode()
            await loop.sock_sendall(sock, too_big[:64 * 1024])
            assert await loop.sock_recv(sock, 1024) == b""  # closed, no reply
            sock.close()
            resp = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(310, {}, b"still"), 10)
            assert resp.remark == "5"  # other connections go on
            await until(lambda: len(server.connections) == 1, "the closed connection to go")
        finally:
            await client.close()
            await server.close()

    run(factory, main())
