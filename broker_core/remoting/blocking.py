"""A blocking transport for synchronous SDK calls: one socket per (thread, address), used directly by
the calling thread, so a synchronous send costs no hand-off to the client event loop and back (the
round trip that dominates one-message-at-a-time sends). Responses are matched by opaque; anything else
on the socket (server notifications) is ignored here, since the event-loop transport carries those."""

from __future__ import annotations

import itertools
import socket
import threading
import time

from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand
from broker_core.protocol.acl import SessionCredentials, sign_command
from broker_core.remoting.client import RemotingTimeout, default_serialize_type


class _Socket:
    def __init__(self, addr: str, connect_timeout: float) -> None:
        host, _, port = addr.rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"cannot connect to {addr}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.addr = addr

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
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                s.sock.settimeout(left)
                data = s.sock.recv(1 << 16)
                if not data:
                    raise ConnectionError(f"connection to {addr} closed")
                for resp in s.decoder.feed(data):
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
