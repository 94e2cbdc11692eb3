"""A blocking transport for synchronous SDK calls: one socket per (thread, address), used directly by
the calling thread, so a synchronous send or pull costs no hand-off to the client event loop and back (the
round trip that dominates one-at-a-time requests). Responses are matched by opaque; anything else
on the socket (server notifications) is ignored here, since the event-loop transport carries those.

A frame is read by its length: the 8 head bytes, then the rest straight into one buffer of its size
(``recv_into``), so a pull's megabyte of records is copied once from the kernel, not gathered chunk by chunk.
A frame the codec refuses (over the size limit, bad lengths or type) drops the socket: nothing after it on the
stream could be trusted."""

from __future__ import annotations

import itertools
import socket
import threading
import time

from broker_core.codec.wire import FRAME_HEAD, FRAME_HEAD_SIZE
from broker_core.protocol import ProtocolError, RemotingCommand
from broker_core.protocol.acl import SessionCredentials, sign_command
from broker_core.protocol.command import check_frame_head, decode_command
from broker_core.remoting.client import RemotingTimeout, default_serialize_type


class _Socket:
    def __init__(self, addr: str, connect_timeout: float) -> None:
        host, _, port = addr.rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"cannot connect to {addr}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.addr = addr
        self.head = bytearray(FRAME_HEAD_SIZE)

    def recv_into(self, view: memoryview, deadline: float) -> None:
        """Fill ``view`` from the socket by ``deadline`` (TimeoutError), or ConnectionError if the peer closes."""
        got, size = 0, len(view)
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            n = self.sock.recv_into(view[got:], size - got, socket.MSG_WAITALL)
            if n == 0:
                raise ConnectionError(f"connection to {self.addr} closed")
            got += n

    def read_frame(self, deadline: float) -> RemotingCommand:
        """The next whole command on the socket."""
        with memoryview(self.head) as head:
            self.recv_into(head, deadline)
        length, word = FRAME_HEAD.unpack(self.head)
        serialize_type, header_len = check_frame_head(length, word)
        rest = bytearray(length - 4)
        with memoryview(rest) as view:
            self.recv_into(view, deadline)
            header, body = bytes(view[:header_len]), bytes(view[header_len:])
        return decode_command(serialize_type, header, body)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class BlockingClient:
    _opaque = itertools.count(1 << 30)

    def __init__(self, connect_timeout: float = 3.0, serialize_type: int | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        self.connect_timeout = connect_timeout
        self.serialize_type = default_serialize_type() if serialize_type is None else serialize_type
        self.credentials = credentials  # sign every request (RocketMQ ACL), as RemotingClient does
        self._local = threading.local()
        self._all: list[_Socket] = []
        self._lock = threading.Lock()

    def _socket(self, addr: str) -> _Socket:
        socks = getattr(self._local, "socks", None)
        if socks is None:
            socks = self._local.socks = {}
        s = socks.get(addr)
        if s is None:
            s = socks[addr] = _Socket(addr, self.connect_timeout)
            with self._lock:
                self._all.append(s)
        return s

    def _drop(self, s: _Socket) -> None:
        s.close()
        self._local.socks.pop(s.addr, None)

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        reused = addr in getattr(self._local, "socks", {})
        try:
            return self._invoke(addr, cmd, timeout)
        except ConnectionError:
            if not reused:
                raise
            # A pooled socket whose peer went away (e.g. a restarted broker): one fresh attempt.
            return self._invoke(addr, cmd, timeout)

    def _invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        s = self._socket(addr)
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.serialize_type = self.serialize_type
        if self.credentials is not None:
            sign_command(cmd, self.credentials)
        deadline = time.monotonic() + timeout
        try:
            s.sock.settimeout(timeout)
            s.sock.sendall(cmd.encode())
            while True:
                resp = s.read_frame(deadline)
                if resp.is_response and resp.opaque == cmd.opaque:
                    return resp
        except TimeoutError:
            self._drop(s)  # a late reply would confuse the next request on this socket
            raise RemotingTimeout(f"request {cmd.code} to {addr} timed out after {timeout:.1f}s") from None
        except (OSError, ProtocolError) as exc:
            self._drop(s)
            raise ConnectionError(f"connection to {addr} failed: {exc}") from None

    def close(self) -> None:
        with self._lock:
            socks, self._all = self._all, []
        for s in socks:
            s.close()
