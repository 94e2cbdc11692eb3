"""RemotingServer back-pressure, in process on asyncio's loop and on uvloop: a client that never reads its
responses makes the server stop reading it once the unsent output passes the high-water mark; the output never
grows past the high-water mark plus one response; other connections are served meanwhile; once the client
reads, every response arrives, in order."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.remoting.server import Connection, RemotingServer
from tests.unit.remoting.loop_helpers import connect, loop_factories, read_responses, run, until

CODE = 7001
BODY = 256 * 1024
HIGH, LOW = 512 * 1024, 128 * 1024
REQUESTS = 200  # 50 MiB of responses if nothing pushed back


@pytest.mark.parametrize("factory", loop_factories())
def test_a_client_that_does_not_read_is_paused_and_others_are_served(factory) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        seen_unsent: list[int] = []

        def big(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            seen_unsent.append(conn.write_buffer_size)  # what is queued before this response is written
            return cmd.response(ResponseCode.SUCCESS, body=b"x" * BODY)

        server = RemotingServer("test", {CODE: big}, write_buffer_high=HIGH, write_buffer_low=LOW)
        port = await server.start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        try:
            slow = await connect(port, 64 * 1024)
            await loop.sock_sendall(slow, b"".join(
                RemotingCommand(CODE, n, 0, {}, b"").encode() for n in range(1, REQUESTS + 1)))
            await until(lambda: any(c.paused for c in server.connections), "the slow connection to be paused")
            conn = next(c for c in server.connections if c.paused)
            answered = len(seen_unsent)
            assert answered < REQUESTS and conn.backlog, "the server kept answering a client that does not read"
            assert conn.write_buffer_size <= HIGH + BODY + 1024
            assert max(seen_unsent) <= HIGH  # never answered while past the high-water mark

            other = await connect(port, 1 << 20)  # a second client is served while the first is paused
            await loop.sock_sendall(other, RemotingCommand(CODE, 1, 0, {}, b"").encode())
            (resp,) = await read_responses(other, 1)
            assert resp.code == ResponseCode.SUCCESS and len(resp.body) == BODY
            other.close()
            assert conn.paused and len(seen_unsent) == answered + 1  # still nothing more for the slow one

            responses = await read_responses(slow, REQUESTS)  # reading drains it: everything, in order
            assert [r.opaque for r in responses] == list(range(1, REQUESTS + 1))
            assert all(r.code == ResponseCode.SUCCESS and len(r.body) == BODY for r in responses)
            assert conn.pauses >= 1 and not conn.paused and not conn.backlog
            assert max(seen_unsent) <= HIGH
            slow.close()
        finally:
            await server.close()

    run(factory, main())


def test_the_low_water_mark_must_not_pass_the_high_one() -> None:
    with pytest.raises(ValueError, match="low-water"):
        RemotingServer("test", {}, write_buffer_high=1024, write_buffer_low=4096)

