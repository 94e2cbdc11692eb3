"""A blocking transport for synchronous SDK calls: one socket per (thread, address), used directly by
the calling thread, so a synchronous send or pull costs no hand-off to the client event loop and back (the
round trip that dominates one-at-a-time requests). Responses are matched by opaque; anything else
on the socket (server notifications) is ignored here, since the event-loop transport carries those.

The socket stays in blocking mode; the request's deadline is the kernel's ``SO_RCVTIMEO``/``SO_SNDTIMEO``, set
only when the time left has moved away from the one set (Python's own socket timeout would ``poll()`` before
every call and switch ``O_NONBLOCK`` with each ``settimeout``). A request is then one ``send`` and, for a small
answer, one ``recv``.

Reads go into a buffer kept with the socket, as many bytes as the kernel has (one call usually brings the whole
answer); bytes past the frame (a notification right behind it) stay there for the next read. A frame larger
than that buffer is read by its length: its header and body each straight into a bytes object of their size
(``receive.BytesReceiver``, ``MSG_WAITALL``), so a pull's megabyte of records is copied once from the kernel,
not gathered chunk by chunk, nor copied again.
A frame the codec refuses (over the size limit, bad lengths or type) drops the socket: nothing after it on the
stream could be trusted.

Pipelining: :meth:`BlockingClient.submit` sends a request without waiting, :meth:`BlockingClient.result` waits
for its answer, so a caller keeps several requests in flight on the one socket (a consumer catching up pulls the
next batch while it decodes this one). An answer read while waiting for another request's is kept with the
socket (by opaque) until its own ``result``; an answer nobody waits for any more (``discard``) is dropped when it
comes. A timeout or a broken socket drops the socket, and every request in flight on it fails."""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from dataclasses import dataclass

from broker_core.codec.wire import FRAME_HEAD, FRAME_HEAD_SIZE, decode_frame
from broker_core.protocol import ProtocolError, RemotingCommand
from broker_core.protocol.acl import SessionCredentials, sign_command
from broker_core.protocol.command import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_RESPONSE,
    LANGUAGES,
    check_frame_head,
    decode_command,
)
from broker_core.remoting.client import RemotingTimeout, default_serialize_type
from broker_core.remoting.receive import BytesReceiver

READ_BUFFER_SIZE = 64 * 1024  # per socket; frames up to this size are read into it, larger ones by their length
# The kernel timeout may outlast the deadline by this much before it is set again (each setting is two
# setsockopt calls; a request's time left shrinks by microseconds from one call to the next).
TIMEOUT_SLACK = 0.005
_TIMEVAL = struct.Struct("@ll")  # struct timeval (LP64: tv_sec, tv_usec)
_MAX_KERNEL_TIMEOUT = 86400.0  # longer waits expire early and are waited again (see _recv)
_monotonic = time.monotonic
_unpack_head = FRAME_HEAD.unpack_from


class _Socket:
    __slots__ = ("addr", "buf", "closed", "end", "kept", "sock", "start", "timeout", "view", "waiting")

    def __init__(self, addr: str, connect_timeout: float) -> None:
        host, _, port = addr.rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"cannot connect to {addr}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(None)  # blocking; deadlines are the kernel's timeouts (set_deadline)
        self.timeout = 0.0  # the SO_RCVTIMEO/SO_SNDTIMEO set, 0 for none
        self.addr = addr
        self.buf = bytearray(READ_BUFFER_SIZE)
        self.view = memoryview(self.buf)
        self.start = self.end = 0  # buf[start:end]: bytes received, not yet part of a returned frame
        self.waiting: set[int] = set()  # opaques of submitted requests whose answers are still wanted
        self.kept: dict[int, RemotingCommand] = {}  # answers of submitted requests read before their result()
        self.closed = False

    def set_deadline(self, deadline: float) -> None:
        """Bound the next blocking call by ``deadline``; TimeoutError once it has passed. The kernel timeout is
        set again only when it would outlast the deadline, or is far shorter than the time left (it would then
        expire early, and be set again by the caller's next try)."""
        left = deadline - _monotonic()
        if left <= 0:
            raise TimeoutError
        t = self.timeout
        if t > left + TIMEOUT_SLACK or t < left * 0.5:
            self._set_timeout(left)

    def _set_timeout(self, seconds: float) -> None:
        usec = max(int(min(seconds, _MAX_KERNEL_TIMEOUT) * 1e6), 1)  # at least 1 us: 0 is "never"
        tv = _TIMEVAL.pack(*divmod(usec, 1_000_000))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        self.timeout = seconds

    def send(self, data: bytes, deadline: float) -> None:
        """All of ``data`` by ``deadline`` (TimeoutError)."""
        self.set_deadline(deadline)
        try:
            sent = self.sock.send(data)  # a request usually goes in one call
        except BlockingIOError:  # the kernel timeout expired before anything was taken
            sent = 0
        if sent < len(data):
            self._send_rest(data, sent, deadline)

    def _send_rest(self, data: bytes, sent: int, deadline: float) -> None:
        size = len(data)
        with memoryview(data) as view:
            while sent < size:
                self.set_deadline(deadline)
                try:
                    sent += self.sock.send(view[sent:] if sent else data)
                except BlockingIOError:  # the kernel timeout expired before anything was taken
                    pass

    def _recv(self, view: memoryview, deadline: float, flags: int = 0) -> int:
        """One ``recv_into(view)`` of at least one byte by ``deadline`` (TimeoutError); ConnectionError if the
        peer closed."""
        while True:
            self.set_deadline(deadline)
            try:
                n = self.sock.recv_into(view, 0, flags)
            except BlockingIOError:  # SO_RCVTIMEO expired with nothing received: the deadline decides
                continue
            if n == 0:
                raise ConnectionError(f"connection to {self.addr} closed")
            return n

    def _fill(self, need: int, deadline: float) -> int:
        """At least ``need`` (<= the buffer's size) unread bytes in the buffer; returns where they start."""
        start, end = self.start, self.end
        if start + need > len(self.buf):  # move the unread bytes to the front to make room
            self.buf[:end - start] = self.buf[start:end]
            start, end = 0, end - start
            self.start, self.end = start, end
        view = self.view
        while end - start < need:
            end += self._recv(view[end:] if end else view, deadline)
            self.end = end
        return start

    def read_frame(self, deadline: float, fresh: bool = False) -> RemotingCommand:
        """The next whole command on the socket. ``fresh``: the kernel timeout was just set for ``deadline`` (by
        :meth:`send`), so with nothing buffered the first ``recv`` goes straight to the socket (the usual answer
        comes whole in that one call)."""
        start = self.start
        if fresh and self.end == 0:
            try:
                n = self.sock.recv_into(self.view)
            except BlockingIOError:  # SO_RCVTIMEO expired with nothing received: _fill waits out the deadline
                n = -1
            if n == 0:
                raise ConnectionError(f"connection to {self.addr} closed")
            if n > 0:
                self.end = n
        if self.end - start < FRAME_HEAD_SIZE:
            start = self._fill(FRAME_HEAD_SIZE, deadline)
        length, word = _unpack_head(self.buf, start)
        size = length + 4
        whole = FRAME_HEAD_SIZE < size <= self.end - start
        if whole:  # the whole frame is here (the usual answer): one codec call
            stop = start + size
            cmd = decode_frame(bytes(self.view[start:stop]), DEFAULT_MAX_FRAME_BYTES, RemotingCommand, LANGUAGES,
                               "OTHER")
            if cmd is not None:
                self._consumed(stop)
                return cmd
        serialize_type, header_len = check_frame_head(length, word)  # a frame decode_frame leaves to the general way
        if self.end - start < size:
            if size > len(self.buf):
                return self._read_large(serialize_type, header_len, length, deadline)
            start = self._fill(size, deadline)
        stop = start + size
        self._consumed(stop)
        frame = bytes(self.view[start:stop])
        if not whole:  # a frame that came in parts: the codec's one call, which the whole one above already had
            cmd = decode_frame(frame, size, RemotingCommand, LANGUAGES, "OTHER")
            if cmd is not None:
                return cmd
        hstart = FRAME_HEAD_SIZE
        return decode_command(serialize_type, frame[hstart:hstart + header_len], frame[hstart + header_len:])

    def _consumed(self, stop: int) -> None:
        """A frame ending at ``stop`` was taken from the buffer: what follows it (the start of the next frame) stays
        for the next read; an empty buffer starts again at its front."""
        if stop == self.end:
            self.start = self.end = 0
        else:
            self.start = stop

    def _read_large(self, serialize_type: int, header_len: int, length: int, deadline: float) -> RemotingCommand:
        """A frame over the buffer's size: every buffered byte is its own; the header and the body are each
        received into a bytes object of their size (``BytesReceiver``), the body with ``MSG_WAITALL``."""
        with self.view[self.start + FRAME_HEAD_SIZE:self.end] as have:
            self.start = self.end = 0
            header = BytesReceiver(header_len, have[:header_len])
            body = BytesReceiver(length - 4 - header_len, have[header_len:])
        return decode_command(serialize_type, self._receive(header, deadline), self._receive(body, deadline))

    def _receive(self, part: BytesReceiver, deadline: float) -> bytes:
        """``part`` received in full by ``deadline`` (TimeoutError); ConnectionError if the peer closed."""
        while part.filled < part.size:
            self.set_deadline(deadline)
            try:
                n = part.recv(self.sock, socket.MSG_WAITALL)
            except BlockingIOError:  # SO_RCVTIMEO expired with nothing received: the deadline decides
                continue
            if n == 0:
                raise ConnectionError(f"connection to {self.addr} closed")
        return part.take()

    def close(self) -> None:
        """Shut the socket down, then close it: a thread blocked in recv on it (a held long-polling pull) wakes
        with end-of-stream (ConnectionError) instead of waiting out its timeout; close alone would not wake it."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass(slots=True)
class Submitted:
    """A request sent by :meth:`BlockingClient.submit` whose answer :meth:`BlockingClient.result` waits for."""

    sock: _Socket
    opaque: int
    deadline: float
    code: int
    timeout: float


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

    def _socks(self) -> dict[str, _Socket]:
        """This thread's sockets by address."""
        try:
            socks: dict[str, _Socket] = self._local.socks
        except AttributeError:
            socks = self._local.socks = {}
        return socks

    def _socket(self, addr: str) -> _Socket:
        socks = self._socks()
        s = socks.get(addr)
        if s is None:
            s = socks[addr] = _Socket(addr, self.connect_timeout)
            with self._lock:
                self._all.append(s)
        return s

    def _drop(self, s: _Socket) -> None:
        s.close()
        self._socks().pop(s.addr, None)

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        s = self._socks().get(addr)
        reused = s is not None
        try:
            return self._invoke(s or self._socket(addr), addr, cmd, timeout)
        except ConnectionError:
            if not reused:
                raise
            # A pooled socket whose peer went away (e.g. a restarted broker): one fresh attempt.
            return self._invoke(self._socket(addr), addr, cmd, timeout)

    def _prepare(self, cmd: RemotingCommand) -> int:
        """Give ``cmd`` a fresh opaque, this client's serialize type and its signature; returns the opaque."""
        opaque = cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.serialize_type = self.serialize_type
        if self.credentials is not None:
            sign_command(cmd, self.credentials)
        return opaque

    def _invoke(self, s: _Socket, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        opaque = self._prepare(cmd)
        deadline = _monotonic() + timeout
        try:
            s.send(cmd.encode(), deadline)
            resp = s.read_frame(deadline, fresh=not s.waiting)
            while resp.opaque != opaque or not resp.flags & FLAG_RESPONSE:  # a notification before the answer
                self._keep(s, resp)
                resp = s.read_frame(deadline)
            return resp
        except TimeoutError:
            self._drop(s)  # a late reply would confuse the next request on this socket
            raise RemotingTimeout(f"request {cmd.code} to {addr} timed out after {timeout:.1f}s") from None
        except (OSError, ProtocolError) as exc:
            self._drop(s)
            raise ConnectionError(f"connection to {addr} failed: {exc}") from None

    @staticmethod
    def _keep(s: _Socket, resp: RemotingCommand) -> None:
        """``resp`` came while another answer was awaited: kept when it answers a submitted request still wanted;
        anything else (a notification, a discarded request's answer) is dropped."""
        if resp.flags & FLAG_RESPONSE and resp.opaque in s.waiting:
            s.kept[resp.opaque] = resp

    def submit(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> Submitted:
        """Send ``cmd`` on this thread's socket to ``addr`` without waiting for its answer (see :meth:`result`).
        Raises RemotingTimeout or ConnectionError as :meth:`invoke` (a socket found broken is replaced when
        nothing else is in flight on it)."""
        s = self._socks().get(addr)
        if s is not None and not s.waiting:
            try:
                return self._submit(s, addr, cmd, timeout)
            except ConnectionError:
                s = None  # a pooled socket whose peer went away: one fresh attempt
        return self._submit(s or self._socket(addr), addr, cmd, timeout)

    def _submit(self, s: _Socket, addr: str, cmd: RemotingCommand, timeout: float) -> Submitted:
        opaque = self._prepare(cmd)
        deadline = _monotonic() + timeout
        try:
            s.send(cmd.encode(), deadline)
        except TimeoutError:
            self._drop(s)
            raise RemotingTimeout(f"request {cmd.code} to {addr} timed out after {timeout:.1f}s") from None
        except OSError as exc:
            self._drop(s)
            raise ConnectionError(f"connection to {addr} failed: {exc}") from None
        s.waiting.add(opaque)
        return Submitted(s, opaque, deadline, cmd.code, timeout)

    def result(self, sub: Submitted) -> RemotingCommand:
        """The answer to a submitted request, waited for until its deadline or ``timeout`` from this call, whichever
        is later (RemotingTimeout; the socket is dropped, failing every request in flight on it); ConnectionError
        when the socket broke."""
        s, opaque = sub.sock, sub.opaque
        resp = s.kept.pop(opaque, None)
        if resp is not None:
            s.waiting.discard(opaque)
            return resp
        if s.closed or opaque not in s.waiting:
            raise ConnectionError(f"connection to {s.addr} was closed with request {sub.code} in flight")
        # the caller may come late (it handled earlier answers meanwhile): the answer gets its timeout from now
        deadline = max(sub.deadline, _monotonic() + sub.timeout)
        try:
            while True:
                resp = s.read_frame(deadline)
                if resp.opaque == opaque and resp.flags & FLAG_RESPONSE:
                    s.waiting.discard(opaque)
                    return resp
                self._keep(s, resp)
        except TimeoutError:
            self._drop(s)
            raise RemotingTimeout(f"request {sub.code} to {s.addr} timed out after {sub.timeout:.1f}s") from None
        except (OSError, ProtocolError) as exc:
            self._drop(s)
            raise ConnectionError(f"connection to {s.addr} failed: {exc}") from None

    @staticmethod
    def discard(sub: Submitted) -> None:
        """The answer to ``sub`` is not wanted: dropped if already read, else when it comes."""
        sub.sock.waiting.discard(sub.opaque)
        sub.sock.kept.pop(sub.opaque, None)

    def close(self) -> None:
        with self._lock:
            socks, self._all = self._all, []
        for s in socks:
            s.close()
