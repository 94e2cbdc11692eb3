"""The blocking client's frame reads (broker_core/remoting/blocking.py): a frame read by its length, however the
peer splits it; a server notification before the answer skipped; a frame the codec refuses drops the socket;
bytes after a frame kept for the next read; deadlines kept by the kernel timeouts, shorter or longer than the
last one set."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from broker_core.codec.wire import FRAME_HEAD
from broker_core.protocol import FrameDecoder, RemotingCommand
from broker_core.remoting.blocking import READ_BUFFER_SIZE, BlockingClient
from broker_core.remoting.client import RemotingTimeout

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



def test_a_large_frame_whose_header_outgrows_the_first_read_is_read_whole(server: Callable[[Serve], str]) -> None:
    """A header (a 100 KiB remark) longer than the client's read buffer: received partly from the buffer, partly
    from the socket (remoting/receive.py), then the body; both parts come back as bytes."""
    remark, body = "r" * (100 * 1024), bytes(range(256)) * 1000

    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        frame = req.response(0, remark, {"k": "v"}, body).encode()
        assert len(frame) > 2 * READ_BUFFER_SIZE
        conn.sendall(frame[:1000])  # the frame head and the start of the header first
        conn.sendall(frame[1000:])

    client = BlockingClient()
    addr = server(serve)
    for _ in range(2):
        resp = client.invoke(addr, RemotingCommand.request(11, {}), timeout=10)
        assert resp.remark == remark and resp.header == {"k": "v"} and resp.body == body
        assert type(resp.body) is bytes and type(resp.remark) is str
    client.close()

# ---------------------------------------------------------------------------------------------------------------
# The read buffer (several frames per recv, frames split across recvs) and the kernel timeouts (SO_RCVTIMEO).


def _answer(req: RemotingCommand, body: bytes = b"x") -> bytes:
    return req.response(0, "ok", {"queueOffset": 1}, body).encode()


def test_a_small_frame_split_across_recv_calls_is_read_whole(server: Callable[[Serve], str]) -> None:
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        data = _answer(req, b"z" * 300)
        for cut in ((0, 3), (3, 11), (11, 40), (40, len(data))):  # inside the head, the header, the body
            conn.sendall(data[cut[0]:cut[1]])
            time.sleep(0.02)

    client = BlockingClient()
    addr = server(serve)
    for _ in range(2):
        resp = client.invoke(addr, RemotingCommand.request(11, {}), timeout=5)
        assert resp.body == b"z" * 300 and resp.header["queueOffset"] == "1"
    client.close()


def test_bytes_after_a_frame_are_kept_for_the_next_read(server: Callable[[Serve], str]) -> None:
    """An answer and, in the same write, a notification and the head of another frame: the first read returns the
    answer, the next ones the notification and the frame completed by a later write; nothing is lost."""
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        note = RemotingCommand.request(40, {"consumerGroup": "g"}).encode()
        last = req.response(0, "", {}, b"last").encode()
        conn.sendall(_answer(req) + note + last[:5])
        time.sleep(0.05)
        conn.sendall(last[5:])

    client = BlockingClient()
    addr = server(serve)
    req = RemotingCommand.request(11, {})
    assert client.invoke(addr, req, timeout=5).body == b"x"
    s = client._local.socks[addr]
    deadline = time.monotonic() + 5
    note = s.read_frame(deadline)
    assert note.code == 40 and not note.is_response and note.header == {"consumerGroup": "g"}
    last = s.read_frame(deadline)
    assert last.is_response and last.opaque == req.opaque and last.body == b"last"
    assert s.start == s.end == 0
    client.close()


def test_a_notification_in_the_same_write_as_the_answer_is_skipped_next_time(server: Callable[[Serve], str]) -> None:
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        conn.sendall(_answer(req, b"%d" % req.opaque) + RemotingCommand.request(40, {"consumerGroup": "g"}).encode())

    client = BlockingClient()
    addr = server(serve)
    for _ in range(5):
        req = RemotingCommand.request(11, {})
        assert client.invoke(addr, req, timeout=5).body == b"%d" % req.opaque
    client.close()


def test_a_large_frame_behind_a_small_one_in_the_buffer_is_read_whole(server: Callable[[Serve], str]) -> None:
    body = bytes(range(256)) * 1024  # 256 KiB: larger than the read buffer

    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        data = RemotingCommand.request(40, {"consumerGroup": "g"}).encode() + _answer(req, body)
        conn.sendall(data[:30000])
        time.sleep(0.02)
        conn.sendall(data[30000:])

    client = BlockingClient()
    addr = server(serve)
    for _ in range(2):
        assert client.invoke(addr, RemotingCommand.request(11, {}), timeout=10).body == body
    client.close()


def test_a_timeout_raises_remoting_timeout_and_drops_the_socket(server: Callable[[Serve], str]) -> None:
    answered = threading.Event()

    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        if req.header.get("answer") == "no":
            conn.sendall(_answer(req)[:10])  # part of the answer, then nothing
            return
        conn.sendall(_answer(req))
        answered.set()

    client = BlockingClient()
    addr = server(serve)
    assert client.invoke(addr, RemotingCommand.request(11, {}), timeout=3).body == b"x"  # a 3 s kernel timeout
    started = time.monotonic()
    with pytest.raises(RemotingTimeout):
        client.invoke(addr, RemotingCommand.request(11, {"answer": "no"}), timeout=0.3)
    assert 0.25 <= time.monotonic() - started < 1.5  # the shorter deadline holds, not the 3 s set before
    assert not client._local.socks  # dropped: a late reply must not answer the next request
    client.close()


def test_a_deadline_longer_than_the_kernel_timeout_set_before_is_waited_for(server: Callable[[Serve], str]) -> None:
    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        time.sleep(float(req.header.get("delay", "0")))
        conn.sendall(_answer(req))

    client = BlockingClient()
    addr = server(serve)
    assert client.invoke(addr, RemotingCommand.request(11, {}), timeout=0.1).body == b"x"  # a 0.1 s kernel timeout
    assert client.invoke(addr, RemotingCommand.request(11, {"delay": "0.4"}), timeout=5).body == b"x"
    # a kernel timeout kept (1 s, over half the 1.9 s left) expires before the answer: the wait goes on
    assert client.invoke(addr, RemotingCommand.request(11, {}), timeout=1).body == b"x"
    assert client.invoke(addr, RemotingCommand.request(11, {"delay": "1.3"}), timeout=1.9).body == b"x"
    client.close()



def test_a_send_the_kernel_takes_in_part_goes_on_from_where_it_stopped() -> None:
    """``_Socket.send``: one call in the usual case; when the kernel takes part of the request (or its timeout
    expires with nothing taken), the rest follows, in order, until all is sent."""
    from broker_core.remoting.blocking import _Socket

    class Partial:
        def __init__(self, takes: list[int]) -> None:
            self.takes, self.out = takes, bytearray()

        def send(self, data: bytes | memoryview) -> int:
            n = self.takes.pop(0) if self.takes else len(data)
            if n < 0:
                raise BlockingIOError  # SO_SNDTIMEO expired, nothing taken
            self.out += bytes(data[:n])
            return n

        def setsockopt(self, *args: object) -> None:
            pass

    data = bytes(range(256)) * 40
    for takes in ([], [100], [100, -1, 3000, 1], [-1, 10]):
        s = _Socket.__new__(_Socket)
        s.sock, s.timeout = Partial(list(takes)), 0.0  # type: ignore[assignment]
        s.send(data, time.monotonic() + 5.0)
        assert bytes(s.sock.out) == data  # type: ignore[attr-defined]


def test_a_request_larger_than_the_socket_buffers_is_sent_whole(server: Callable[[Serve], str]) -> None:
    """A send the kernel takes in part (the request outgrows both sockets' buffers while the peer reads slowly)
    goes on from where it stopped: the peer gets every byte, in order."""
    got: list[bytes] = []

    def serve(conn: socket.socket, req: RemotingCommand) -> None:
        got.append(req.body)
        conn.sendall(req.response(0).encode())

    addr = server(serve)
    client = BlockingClient()
    body = bytes(range(256)) * (16 * 1024)  # 4 MiB: several partial sends
    try:
        resp = client.invoke(addr, RemotingCommand.request(310, {"b": "T"}, body), timeout=10.0)
        assert resp.code == 0 and got == [body]
    finally:
        client.close()
