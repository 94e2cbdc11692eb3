"""``BytesReceiver``: the parts of a large frame received from a socket straight into bytes objects of their
size (the SDK's blocking transport, ``blocking.py``, reads a pulled megabyte of records this way).

``BytesReceiver(size, prefix)`` starts a ``size``-byte object with ``prefix`` (the bytes already read, at most
``size``; ValueError otherwise); ``fill(data)`` copies the head of ``data`` into the rest (at most what is
missing) and returns the count; ``into()`` is a writable buffer of exactly the unfilled rest, for an event loop to
read into (``asyncio.BufferedProtocol.get_buffer``), and ``advance(n)`` counts the ``n`` bytes it read there
(ValueError past the end); ``len()`` is the count still missing; ``recv(sock, flags)`` receives into the rest
with one ``recv`` call and returns the count, 0 when the peer closed, raising as ``socket.recv_into`` does
(BlockingIOError when the socket's SO_RCVTIMEO expired, EINTR retried after the signal handlers ran);
``filled`` counts the bytes in place; ``take()`` returns the bytes once all ``size`` are there (ValueError before
that, and after a first take).

The C twin (``_native.BytesReceiver``) fills a new bytes object in place, with the GIL released while ``recv``
waits: no zero-filled buffer and no copy at the end, which for a pull of ~800 KiB was most of the client's
cost (the fresh pages of two allocations faulted in, one copy); its ``into()`` is the receiver itself (its buffer
is the unfilled rest), so the broker reads a 4 MiB message body from the socket straight into the bytes object
the store appends (protocol/command.py ``FrameDecoder``). This pure one fills a bytearray and copies it
on ``take()``; ``BROKER_CORE_PURE_PYTHON=1`` selects it. tests/unit/remoting/test_receive.py holds both equal.
"""

from __future__ import annotations

import socket

from broker_core.codec.native import NATIVE


class BytesReceiver:
    __slots__ = ("_buf", "_view", "filled", "size")

    def __init__(self, size: int, prefix: bytes | bytearray | memoryview) -> None:
        n = memoryview(prefix).nbytes
        if size < 0 or n > size:
            raise ValueError("BytesReceiver: the prefix is longer than the size")
        self._buf: bytearray | None = bytearray(size)
        self._buf[:n] = prefix
        self._view = memoryview(self._buf)
        self.filled = n
        self.size = size

    def recv(self, sock: socket.socket, flags: int = 0) -> int:
        if self._buf is None:
            raise ValueError("BytesReceiver: already taken")
        n = sock.recv_into(self._view[self.filled:], 0, flags)
        self.filled += n
        return n

    def __len__(self) -> int:
        return 0 if self._buf is None else self.size - self.filled

    def fill(self, data: bytes | bytearray | memoryview) -> int:
        if self._buf is None:
            raise ValueError("BytesReceiver: already taken")
        with memoryview(data) as src:
            n = min(src.nbytes, self.size - self.filled)
            self._view[self.filled:self.filled + n] = src[:n]
        self.filled += n
        return n

    def into(self) -> memoryview:
        if self._buf is None:
            raise ValueError("BytesReceiver: already taken")
        return self._view[self.filled:]

    def advance(self, n: int) -> None:
        if self._buf is None:
            raise ValueError("BytesReceiver: already taken")
        if not 0 <= n <= self.size - self.filled:
            raise ValueError(f"BytesReceiver: cannot advance {n} bytes, {self.size - self.filled} are missing")
        self.filled += n

    def take(self) -> bytes:
        if self._buf is None:
            raise ValueError("BytesReceiver: already taken")
        if self.filled < self.size:
            raise ValueError(f"BytesReceiver: {self.filled} of {self.size} bytes received")
        data, self._buf = bytes(self._buf), None  # the view stays: an into() slice may still be held
        return data


PyBytesReceiver = BytesReceiver  # the pure twin stays reachable for the equality tests
if NATIVE is not None:
    BytesReceiver = NATIVE.BytesReceiver  # type: ignore[misc]  # the C twin of the same interface
