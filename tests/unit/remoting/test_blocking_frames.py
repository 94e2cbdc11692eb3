"""The blocking client's frame reads (broker_core/remoting/blocking.py): a frame read by its length, however the
peer splits it; a server notification before the answer skipped; a frame the codec refuses drops the socket."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from broker_core.codec.wire import FRAME_HEAD
from broker_core.protocol import FrameDecoder, RemotingCommand
from broker_core.remoting.blocking import BlockingClient

Serve = Callable[[socket.socket, RemotingCommand], None]


@pytest.fixture
def server() -> Iterator[Callable[[Serve], str]]:
    """A one-connection server on a free port; ``serve(conn, request)`` answers each request."""
    listeners: list[socket.socket] = []

    def start(serve: Serve) -> str:
        lst = socket.create_server(("127.0.0.1", 0))
        listeners.append(lst)

        def run() -> None:
            conn, _ = lst.accept()
            decoder = FrameDecoder()
            with conn:
                while data := conn.recv(65536):
                    for req in decoder.feed(data):
                        serve(conn, req)

        threading.Thread(target=run, daemon=True).start()
        return f"127.0.0.1:{lst.getsockname()[1]}"

    yield start
    for lst in listeners:
        lst.close()


def test_a_large_frame_sent_in_small_pieces_is_read_whole(server: Callable[[Serve], str]) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB

    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        data = req.response(0, "FOUND", {"nextBeginOffset": 7}, body).encode()
        for i in range(0, len(data), 999):
            conn.sendall(data[i:i + 999])

    client = BlockingClient()
    resp = client.invoke(server(serve), RemotingCommand.request(11, {"topic": "T"}), timeout=10)
    client.close()
    assert resp.body == body and resp.header["nextBeginOffset"] == "7" and resp.remark == "FOUND"


def test_a_notification_before_the_answer_is_skipped(server: Callable[[Serve], str]) -> None:
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        conn.sendall(RemotingCommand.request(40, {"consumerGroup": "g"}).encode())  # NOTIFY_CONSUMER_IDS_CHANGED
        conn.sendall(req.response(0, "ok", {}, b"x").encode())

    client = BlockingClient()
    addr = server(serve)
    for _ in range(3):
        resp = client.invoke(addr, RemotingCommand.request(11, {}), timeout=5)
        assert resp.is_response and resp.body == b"x"
    client.close()


def test_an_oversized_frame_drops_the_socket_with_a_clear_error(server: Callable[[Serve], str]) -> None:
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        conn.sendall(FRAME_HEAD.pack(1 << 30, 1 << 24 | 10))  # a 1 GiB frame: over the 16 MiB limit

    client = BlockingClient()
    with pytest.raises(ConnectionError, match="exceeds the limit"):
        client.invoke(server(serve), RemotingCommand.request(11, {}), timeout=5)
    assert not getattr(client._local, "socks", {})  # the socket was dropped
    client.close()


def test_a_peer_closing_mid_frame_is_a_connection_error(server: Callable[[Serve], str]) -> None:
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        conn.sendall(req.response(0, "", {}, b"y" * 5000).encode()[:3000])
        conn.shutdown(socket.SHUT_RDWR)

    client = BlockingClient()
    with pytest.raises(ConnectionError, match="closed"):
        client.invoke(server(serve), RemotingCommand.request(11, {}), timeout=5)
    client.close()
