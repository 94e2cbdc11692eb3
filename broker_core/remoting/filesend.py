"""Responses whose body goes from a file to the socket inside the kernel (``os.sendfile``), never through Python
bytes: the broker's READ_SNAPSHOT_SEGMENT answers (``broker_core/server/snapshot.py``).

A handler returns a :class:`FileResponse`: the response command (its own body empty) and a :class:`FileRegion`
(an open descriptor the response owns, an offset and a count). The connection (``server.Connection``) writes
the frame's head and header, whose length word counts the region, then the region, on the transport's socket.

Invariants (``server.Connection`` keeps the ones about order):

1. Frames never interleave and responses leave in the order they were sent: while a region goes out, every later
   response of the connection waits in its outbox and is written after it, in order.
2. Nothing else writes the socket while a :class:`FileSender` does: it starts only once the transport's own
   write buffer is empty (responses written before it are out), and the transport is given nothing new until
   the sender is done.
3. A region's descriptor is closed exactly once: when its bytes are sent, or when the connection is lost or
   the response is dropped (a oneway request, a closing transport).
4. The bytes sent are the file's bytes at ``[offset, offset + count)`` when sent: the caller opens the file
   (a snapshot's hard link) and bounds the range before handing it over, so retention unlinking the segment
   meanwhile changes nothing (the open descriptor keeps the inode).

Crash behaviour: a region the file cannot fill (``sendfile`` meets end of file: the file was truncated) or a
socket error closes the connection, as the frame's length was already promised; the peer sees the connection
close mid-frame, never wrong bytes in a complete frame.

Both event loops: asyncio's and uvloop's loops refuse ``add_writer`` on a descriptor a transport owns, and uvloop
has no native ``loop.sendfile`` (asyncio's fallback would read the file into Python bytes). The sender works on
a ``dup`` of the socket's descriptor (the same socket under another number, so a transport closing its own
never makes ours name another file): it writes there, and waits for writability there with ``add_writer``,
removed before the duplicate is closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from broker_core.codec.wire import FRAME_HEAD
from broker_core.protocol import RemotingCommand

log = logging.getLogger(__name__)


@dataclass
class FileRegion:
    """``count`` bytes of the open descriptor ``fd`` from ``offset``; the region owns ``fd`` (see :meth:`close`)."""

    fd: int
    offset: int
    count: int

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


@dataclass
class FileResponse:
    """A response whose body is ``region``: ``command`` is the response without body."""

    command: RemotingCommand
    region: FileRegion

    def head(self) -> bytes:
        """The frame's head and header; its length word counts the region's bytes as the body."""
        st, header = self.command.encode_header()
        return FRAME_HEAD.pack(4 + len(header) + self.region.count, (st << 24) | len(header)) + header


@dataclass
class GatherResponse:
    """A response whose body is ``parts``, memoryviews of the mapped CommitLog (a pull's runs of records), given
    to the transport with the frame's head in one ``writelines`` (one ``writev``): no Python copy of the body,
    RocketMQ's zero-copy pull transfer. ``release`` (the store's hold on the segments) is called once, when the
    parts were handed over or the response was dropped. Under uvloop a part the socket did not take yet stays
    referenced by the transport; it stays valid after ``release``: a segment deleted meanwhile keeps its
    mapping until the last view goes (``MappedFile._cleanup``)."""

    command: RemotingCommand
    parts: list[memoryview]
    release: Callable[[], None]

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.parts)

    def head(self) -> bytes:
        """The frame's head and header; its length word counts the parts as the body."""
        st, header = self.command.encode_header()
        return FRAME_HEAD.pack(4 + len(header) + self.size, (st << 24) | len(header)) + header

    def write_to(self, transport: asyncio.WriteTransport) -> None:
        """Hand the whole frame to ``transport`` and release the segments."""
        try:
            transport.writelines([self.head(), *self.parts])
        finally:
            self.release()

    def to_bytes(self) -> bytes:
        """The whole frame as one bytes object (a copy: for a response that must wait in an outbox), released."""
        try:
            return b"".join([self.head(), *self.parts])
        finally:
            self.release()


class FileSender:
    """Sends one :class:`FileResponse` on a transport's socket, then calls ``done(None)``, or ``done(exc)`` after
    a failure (the caller closes the connection). :meth:`pump` sends what the socket takes now and returns True
    once everything is sent; otherwise it waits for writability and carries on from the event loop."""

    def __init__(self, transport: asyncio.BaseTransport, resp: FileResponse,
                 done: Callable[[BaseException | None], None]) -> None:
        self.transport = transport
        self.region = resp.region
        self.head = memoryview(resp.head())
        self.done = done
        self.loop = asyncio.get_running_loop()
        self.sock: socket.socket | None = None
        self.watching = False
        self.finished = False

    @property
    def remaining(self) -> int:
        return 0 if self.finished else len(self.head) + self.region.count

    def pump(self) -> bool:
        """Send what the socket takes now; True when the whole response is out or failed (``done`` was called),
        False when it waits for the socket (and carries on from the event loop)."""
        if self.finished:
            return True
        try:
            if not self._send():
                self._watch()
                return False
        except (OSError, EOFError) as exc:
            self._end(exc)
            return True
        self._end(None)
        return True

    def _send(self) -> bool:
        """True once everything is sent, False when the socket (or the transport's buffer) is not ready."""
        # earlier responses still in the transport's buffer go first (invariant 2)
        if self.transport.get_write_buffer_size():  # type: ignore[attr-defined]  # stream transports have it
            return False
        if self.sock is None:
            self.sock = self._dup()
        try:
            while len(self.head):  # MSG_MORE: the header leaves with the file's first bytes
                self.head = self.head[self.sock.send(self.head, socket.MSG_MORE):]
            region = self.region
            while region.count:
                n = os.sendfile(self.sock.fileno(), region.fd, region.offset, region.count)
                if n == 0:
                    raise EOFError(f"the file ended {region.count} bytes before the region did")
                region.offset += n
                region.count -= n
        except (BlockingIOError, InterruptedError):
            return False
        return True

    def abort(self) -> None:
        """Stop without calling ``done`` (the connection is lost): release the descriptors."""
        if not self.finished:
            self.finished = True
            self._release()

    def _watch(self) -> None:
        if self.watching:
            return
        if self.sock is None:  # waiting for the transport's buffer: watch the duplicate all the same
            self.sock = self._dup()
        self.loop.add_writer(self.sock, self._writable)
        self.watching = True

    def _dup(self) -> socket.socket:
        own = self.transport.get_extra_info("socket")
        if own is None:
            raise ConnectionError("the transport has no socket")
        sock = socket.socket(fileno=os.dup(own.fileno()))
        sock.setblocking(False)  # O_NONBLOCK belongs to the shared socket and is already set: never cleared
        return sock

    def _writable(self) -> None:
        self.pump()

    def _release(self) -> None:
        if self.watching and self.sock is not None:
            self.loop.remove_writer(self.sock)
            self.watching = False
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.region.close()

    def _end(self, exc: BaseException | None) -> None:
        self.finished = True
        self._release()
        self.done(exc)
