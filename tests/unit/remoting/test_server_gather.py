"""Gather responses (``broker_core.remoting.filesend.GatherResponse``: a pull's records written from memoryviews of
the mapped CommitLog, never copied into Python bytes), in process on asyncio's loop and on uvloop:
- the bytes that arrive are the segment's, whole and in order, mixed with plain and file responses;
- a client that reads nothing while its segment is deleted (``MappedFile.destroy``) still gets the right bytes
  later (the views keep the mapping alive; no crash, no garbage);
- every response's segment hold is released exactly once: sent, dropped for a oneway request, or queued
  behind a file response (then copied);
- ``MessageStore.get_message(views=True)`` returns views equal to the copying read, and releases its holds."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from broker_core.codec.hashing import tag_hash
from broker_core.config import BrokerConfig
from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.protocol.command import FLAG_ONEWAY
from broker_core.remoting.server import (
    Connection,
    FileRegion,
    FileResponse,
    GatherResponse,
    RemotingServer,
)
from broker_core.store import MessageStore
from broker_core.store.mapped_file import MappedFile
from broker_core.store.message import MessageInner
from tests.unit.remoting.loop_helpers import connect, loop_factories, read_responses, run, until

GATHER, FILE, PLAIN = 7201, 7202, 7203
MIB = 1024 * 1024
SEGMENT = 8 * MIB


class Segment:
    """A real CommitLog segment file with random content; counts the holds the responses took and released."""

    def __init__(self, path: Path) -> None:
        self.mf = MappedFile(path, SEGMENT, create=True)
        self.content = os.urandom(SEGMENT)
        assert self.mf.append_bytes(self.content)
        self.taken = 0
        self.released = 0

    def response(self, cmd: RemotingCommand, ranges: list[tuple[int, int]]) -> GatherResponse:
        holds = []
        for offset, length in ranges:
            held = self.mf.select(offset, length)
            assert held is not None
            holds.append(held)
        self.taken += 1

        def release() -> None:
            self.released += 1
            for h in holds:
                h.release()

        return GatherResponse(cmd.response(ResponseCode.SUCCESS, header={"n": len(ranges)}),
                              [h.buffer for h in holds], release)

    def want(self, ranges: list[tuple[int, int]]) -> bytes:
        return b"".join(self.content[o:o + n] for o, n in ranges)


def _ranges(cmd: RemotingCommand) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in (p.split(":") for p in cmd.header["ranges"].split(","))]


def _server(seg: Segment, file_path: Path) -> RemotingServer:
    def gather(cmd: RemotingCommand, conn: Connection) -> GatherResponse:
        return seg.response(cmd, _ranges(cmd))

    def file_range(cmd: RemotingCommand, conn: Connection) -> FileResponse:
        (offset, length), = _ranges(cmd)
        return FileResponse(cmd.response(ResponseCode.SUCCESS), FileRegion(os.open(file_path, os.O_RDONLY),
                                                                            offset, length))

    def plain(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=bytes([cmd.opaque % 256]) * 1000)

    return RemotingServer("test", {GATHER: gather, FILE: file_range, PLAIN: plain}, write_buffer_high=512 * 1024,
                          write_buffer_low=128 * 1024)


def _req(code: int, opaque: int, ranges: list[tuple[int, int]], oneway: bool = False) -> bytes:
    return RemotingCommand(code, opaque, FLAG_ONEWAY if oneway else 0,
                           {"ranges": ",".join(f"{o}:{n}" for o, n in ranges)}, b"").encode()


@pytest.fixture
def seg(tmp_path: Path) -> Segment:
    return Segment(tmp_path / f"{0:020d}")


@pytest.fixture
def file_path(tmp_path: Path) -> Path:
    path = tmp_path / "file"
    path.write_bytes(os.urandom(2 * MIB))
    return path


@pytest.mark.parametrize("factory", loop_factories())
def test_gather_file_and_plain_responses_arrive_whole_and_in_order(factory: Any, seg: Segment,
                                                                     file_path: Path) -> None:
    file_content = file_path.read_bytes()

    async def main() -> None:
        server = _server(seg, file_path)
        port = await server.start("127.0.0.1", 0)
        try:
            sock = await connect(port, 64 * 1024)  # small: responses queue behind each other
            asked: list[tuple[int, list[tuple[int, int]]]] = []
            for i in range(1, 61):
                code = (GATHER, FILE, PLAIN)[i % 3] if i % 4 else GATHER
                base = (i * 77_777) % (6 * MIB)
                ranges = ([(base, 1 + i * 9_000), (base + 2 * MIB, 5_000)] if code == GATHER
                          else [(i * 1000, 300_000)])
                asked.append((code, ranges))
            await asyncio.get_running_loop().sock_sendall(sock, b"".join(
                _req(code, i, ranges) for i, (code, ranges) in enumerate(asked, 1)))
            responses = await read_responses(sock, len(asked))
            assert [r.opaque for r in responses] == list(range(1, len(asked) + 1))
            for r, (code, ranges) in zip(responses, asked, strict=True):
                assert r.code == ResponseCode.SUCCESS
                if code == GATHER:
                    want = seg.want(ranges)
                elif code == FILE:
                    want = file_content[ranges[0][0]:ranges[0][0] + ranges[0][1]]
                else:
                    want = bytes([r.opaque % 256]) * 1000
                assert r.body == want, f"response {r.opaque}"
            gathers = sum(code == GATHER for code, _ in asked)
            assert seg.taken == seg.released == gathers
            sock.close()
        finally:
            await server.close()

    run(factory, main())


@pytest.mark.parametrize("factory", loop_factories())
def test_a_segment_deleted_while_its_views_wait_in_the_transport_still_sends_its_bytes(
        factory: Any, seg: Segment, file_path: Path) -> None:
    async def main() -> None:
        server = _server(seg, file_path)
        port = await server.start("127.0.0.1", 0)
        try:
            sock = await connect(port, 16 * 1024)  # reads nothing until the segment is gone
            ranges = [(0, 3 * MIB), (4 * MIB, 3 * MIB)]
            await asyncio.get_running_loop().sock_sendall(sock, _req(GATHER, 1, ranges) + _req(PLAIN, 2, [(0, 1)]))
            await until(lambda: seg.released == 1, "the response to be handed to the transport")
            conn = next(iter(server.connections))
            assert conn.write_buffer_size > MIB  # views wait unsent in the transport
            assert seg.mf.destroy(0, 0)  # every hold was released: the file goes now (its mapping stays)
            assert not seg.mf.path.exists()
            first, second = await read_responses(sock, 2)
            assert (first.opaque, second.opaque) == (1, 2)
            assert first.body == seg.want(ranges)
            assert seg.taken == seg.released == 1
            sock.close()
        finally:
            await server.close()

    run(factory, main())


@pytest.mark.parametrize("factory", loop_factories())
def test_oneway_and_closed_connections_release_gather_responses(factory: Any, seg: Segment,
                                                                 file_path: Path) -> None:
    async def main() -> None:
        server = _server(seg, file_path)
        port = await server.start("127.0.0.1", 0)
        try:
            sock = await connect(port, 64 * 1024)
            await asyncio.get_running_loop().sock_sendall(sock, _req(GATHER, 1, [(0, 1000)], oneway=True)
                                                          + _req(PLAIN, 2, [(0, 1)]))
            (resp,) = await read_responses(sock, 1)
            assert resp.opaque == 2  # the oneway request got nothing
            assert seg.taken == seg.released == 1
            sock.close()
            await until(lambda: not server.connections, "the connection to close")
        finally:
            await server.close()

    run(factory, main())


def test_store_views_equal_the_copying_read_and_release_their_segments(tmp_path: Path) -> None:
    cfg = BrokerConfig().with_store_dir(tmp_path)
    cfg.store.mapped_file_size_commit_log_bytes = 256 * 1024  # the queue's records span segments
    store = MessageStore(cfg.validate()).start()
    try:
        for i in range(1200):
            store.put_message(MessageInner("ViewT", os.urandom(700 + i % 50), 0, tags="a" if i % 5 else "b"))
        assert store.dispatch()
        segments = list(store.commit_log.mapped_file_queue.files)
        assert len(segments) > 2
        for offset, hashes in ((0, None), (17, None), (3, {tag_hash("a")})):
            copied = store.get_message("ViewT", 0, offset, 400, hashes, decode=False)
            before = [mf._ref_count for mf in segments]
            viewed = store.get_message("ViewT", 0, offset, 400, hashes, decode=False, views=True)
            assert viewed.status is copied.status
            assert viewed.queue_offsets == copied.queue_offsets
            assert viewed.next_begin_offset == copied.next_begin_offset
            assert all(isinstance(c, memoryview) for c in viewed.chunks)
            assert b"".join(viewed.chunks) == b"".join(copied.chunks)
            assert len(viewed.holds) == len(viewed.chunks) >= 2  # a run per segment, and per gap of filtered tags
            assert sum(mf._ref_count for mf in segments) == sum(before) + len(viewed.holds)
            viewed.release()
            viewed.release()  # idempotent
            assert [mf._ref_count for mf in segments] == before
    finally:
        store.shutdown()
