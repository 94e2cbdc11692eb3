"""Pipelined requests on the blocking client (broker_core/remoting/blocking.py ``submit``/``result``): answers that
come out of order, or behind a notification, reach their own request; an answer read while another was awaited
waits for its own ``result``; a discarded request's answer is dropped when it comes; a plain ``invoke`` between
submitted requests keeps their answers; a peer that closes fails every request in flight."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from broker_core.protocol import FrameDecoder, RemotingCommand
from broker_core.remoting.blocking import BlockingClient

Serve = Callable[[socket.socket, list[RemotingCommand]], None]


@pytest.fixture
def server() -> Iterator[Callable[[int, Serve], str]]:
    """A one-connection server: ``serve(conn, requests)`` runs each time ``batch`` requests have come."""
    listeners: list[socket.socket] = []

    def start(batch: int, serve: Serve) -> str:
        lst = socket.create_server(("127.0.0.1", 0))
        listeners.append(lst)

        def run() -> None:
            conn, _ = lst.accept()
            decoder = FrameDecoder()
            pending: list[RemotingCommand] = []
            with conn:
                while data := conn.recv(65536):
                    pending += decoder.feed(data)
                    while len(pending) >= batch:
                        serve(conn, pending[:batch])
                        del pending[:batch]

        threading.Thread(target=run, daemon=True).start()
        return f"127.0.0.1:{lst.getsockname()[1]}"

    yield start
    for lst in listeners:
        lst.close()


def _answer(req: RemotingCommand, size: int = 10) -> bytes:
    return req.response(0, "OK", {"n": req.header["n"]}, str(req.header["n"]).encode() * size).encode()


def test_answers_out_of_order_behind_a_notification_reach_their_requests(server: Callable[[int, Serve], str]) -> None:
    def serve(conn: socket.socket, reqs: list[RemotingCommand]) -> None:
        notice = RemotingCommand.request(40, {"x": 1}).encode()  # a server request (not a response)
        # the last request's answer first, one of them large (read by its length), a notification in between
        conn.sendall(b"".join([_answer(reqs[2], 100_000), notice, _answer(reqs[0]), _answer(reqs[1])]))

    addr = server(3, serve)
    client = BlockingClient()
    subs = [client.submit(addr, RemotingCommand.request(11, {"n": n}), 5) for n in range(3)]
    got = [client.result(s) for s in subs]
    client.close()
    assert [r.header["n"] for r in got] == ["0", "1", "2"]
    assert got[2].body == b"2" * 100_000 and got[0].body == b"0" * 10


def test_a_discarded_request_s_answer_is_dropped_and_invoke_keeps_submitted_answers(
        server: Callable[[int, Serve], str]) -> None:
    def serve(conn: socket.socket, reqs: list[RemotingCommand]) -> None:
        conn.sendall(b"".join(_answer(r) for r in reqs))  # in order

    addr = server(1, serve)
    client = BlockingClient()
    first = client.submit(addr, RemotingCommand.request(11, {"n": 1}), 5)
    second = client.submit(addr, RemotingCommand.request(11, {"n": 2}), 5)
    client.discard(first)
    # invoke reads past both submitted answers: the first is dropped (discarded), the second kept for result()
    assert client.invoke(addr, RemotingCommand.request(11, {"n": 3}), 5).header["n"] == "3"
    assert client.result(second).header["n"] == "2"
    sock = second.sock
    assert not sock.kept and not sock.waiting
    client.close()


def test_a_peer_that_closes_fails_every_request_in_flight(server: Callable[[int, Serve], str]) -> None:
    def serve(conn: socket.socket, reqs: list[RemotingCommand]) -> None:
        conn.shutdown(socket.SHUT_RDWR)

    addr = server(2, serve)
    client = BlockingClient()
    subs = [client.submit(addr, RemotingCommand.request(11, {"n": n}), 5) for n in range(2)]
    for s in subs:
        with pytest.raises(ConnectionError):
            client.result(s)
    client.close()
