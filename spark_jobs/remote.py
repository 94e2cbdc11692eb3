"""Snapshot segment bytes from the broker over the network, for executors that cannot open the snapshot's files.

The broker's READ_SNAPSHOT_SEGMENT (30911, ``broker_core/server/snapshot.py``) answers a byte range of one segment
of a snapshot, through the snapshot's hard link and never past the segment's bound. This module is its client:
a blocking socket speaking RocketMQ remoting frames built with ``broker_core.codec.wire`` (the import contract
keeps ``spark_jobs`` to the codec and pyspark, so the SDK's asyncio client is not used here; the frame codec is
the same one).

Authorisation: every request carries the snapshot's ``readToken`` (from the manifest the worker got by an
admin's, possibly ACL-signed, SNAPSHOT_SEGMENTS). The broker lets 30911 through its ACL check and verifies the
token, so executors hold no account secret: what leaks with a split is read access to one snapshot until it is
released or expires (at most ``snapshotMaxLifetimeMs``).

:class:`RemoteWindow` keeps the fetched bytes of a split's range in an anonymous mapping reused from window to
window (a fresh one costs a page fault and a zeroed page per 4 KiB, as much again as receiving the bytes); the
walk reads it through a split shifted to the window's start (``split_io.over_split``). Requests are pipelined
(``PIPELINE`` chunks of ``CHUNK_BYTES`` in flight) and each answer's body is received straight into the mapping.
Connections are kept per thread and broker; one the broker closed meanwhile (idle past its
``serverChannelMaxIdleTimeSeconds``) is replaced and the read asked again, once.
"""

from __future__ import annotations

import itertools
import mmap
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from broker_core.codec.wire import (
    FRAME_HEAD,
    HEADER_LENGTH_MASK,
    SERIALIZE_ROCKETMQ,
    decode_binary_header,
    encode_binary_header,
    encode_frame,
)

READ_SNAPSHOT_SEGMENT = 30911  # RequestCode.READ_SNAPSHOT_SEGMENT (broker_core.protocol is off limits here)
LANGUAGE_PYTHON = 3  # LanguageCode.PYTHON's ordinal
VERSION = 409  # MQVersion V4_9_8, what the SDK announces
CHUNK_BYTES = int(os.environ.get("SPARK_JOBS_REMOTE_CHUNK_BYTES", str(4 * 1024 * 1024)))  # <= the broker's 8 MiB
PIPELINE = 4
TIMEOUT_S = float(os.environ.get("SPARK_JOBS_REMOTE_TIMEOUT_S", "60"))


class RemoteReadError(OSError):
    """The broker refused a read (a released or expired snapshot, a wrong token) or the connection failed."""


class _Refused(RemoteReadError):
    """The broker answered with an error code: asking again on another connection changes nothing."""


@dataclass(frozen=True)
class Remote:
    """Where a snapshot's segments can be fetched from: the broker's address, the snapshot and its read token.
    ``prefer_local``: open the snapshot's file when this host can see it (the fast path), fetch otherwise."""

    addr: str
    snapshot_id: str
    token: str
    prefer_local: bool = True


class _Connection:
    """One blocking connection to a broker (one per broker, thread and executor process, reused)."""

    _opaque = itertools.count(1)

    def __init__(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.used = False  # answered before: a failure may be the broker closing it as idle

    def close(self) -> None:
        self.sock.close()

    def send(self, remote: Remote, segment: str, offset: int, length: int) -> int:
        opaque = next(self._opaque) & 0x7FFFFFFF
        header = encode_binary_header(READ_SNAPSHOT_SEGMENT, LANGUAGE_PYTHON, VERSION, opaque, 0, None, {
            "snapshotId": remote.snapshot_id, "segment": segment, "offset": str(offset), "length": str(length),
            "readToken": remote.token})
        self.sock.sendall(encode_frame(SERIALIZE_ROCKETMQ, header))
        return opaque

    def _exact(self, n: int) -> bytes:
        buf = bytearray(n)
        self._into(memoryview(buf))
        return bytes(buf)

    def _into(self, view: memoryview) -> None:
        # MSG_WAITALL: one call (the GIL released throughout) per answer, not one per arriving segment; a prefetch
        # thread then rarely waits for the GIL the walking thread holds
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:], 0, socket.MSG_WAITALL)
            if n == 0:
                raise ConnectionResetError("the broker closed the connection")
            got += n

    def receive(self, targets: dict[int, memoryview]) -> int:
        """Read one answer; its body goes into ``targets[opaque]`` (which it must fill). Returns the opaque."""
        length, word = FRAME_HEAD.unpack(self._exact(FRAME_HEAD.size))
        hlen = word & HEADER_LENGTH_MASK
        if word >> 24 != SERIALIZE_ROCKETMQ:
            raise RemoteReadError(f"unexpected header serialization {word >> 24}")
        code, _lang, _ver, opaque, _flag, remark, _ext = decode_binary_header(self._exact(hlen))
        body_len = length - 4 - hlen
        target = targets.get(opaque)
        if code != 0 or target is None or body_len != len(target):
            self._exact(body_len)  # keep the stream in step before failing
            if code != 0:
                raise _Refused(f"READ_SNAPSHOT_SEGMENT answered {code}: {remark}")
            raise RemoteReadError(f"answer {opaque}: {body_len} bytes where {len(target or b'')} were asked")
        self._into(target)
        return int(opaque)


_local = threading.local()


def _connection(addr: str) -> _Connection:
    conns: dict[str, _Connection] = getattr(_local, "conns", None) or {}
    _local.conns = conns
    conn = conns.get(addr)
    if conn is None:
        try:
            conn = conns[addr] = _Connection(addr)
        except OSError as exc:
            raise RemoteReadError(f"cannot connect to the broker at {addr}: {exc}") from exc
    return conn


def _drop(addr: str) -> None:
    conn = getattr(_local, "conns", {}).pop(addr, None)
    if conn is not None:
        conn.close()


def fetch_into(remote: Remote, segment: str, offset: int, view: memoryview) -> None:
    """Fill ``view`` with the segment's bytes from ``offset`` (the caller keeps the range within the bound). A
    connection kept from earlier reads that fails (the broker closes connections idle past its idle timeout) is
    replaced and the read asked again, once; a refusal is raised at once."""
    for attempt in (1, 2):
        conn = _connection(remote.addr)
        try:
            _fetch(conn, remote, segment, offset, view)
            conn.used = True
            return
        except (OSError, ValueError) as exc:
            _drop(remote.addr)  # a failed stream is never reused
            if isinstance(exc, _Refused):
                raise
            if conn.used and attempt == 1:
                continue
            raise RemoteReadError(f"reading {segment} of snapshot {remote.snapshot_id} from {remote.addr}: "
                                  f"{exc}") from exc


def _fetch(conn: _Connection, remote: Remote, segment: str, offset: int, view: memoryview) -> None:
    pending: dict[int, memoryview] = {}
    pos = 0
    while pos < len(view) or pending:
        while pos < len(view) and len(pending) < PIPELINE:
            n = min(CHUNK_BYTES, len(view) - pos)
            pending[conn.send(remote, segment, offset + pos, n)] = view[pos:pos + n]
            pos += n
        pending.pop(conn.receive(pending))


_pool: list[Any] = []
_pool_lock = threading.Lock()
POOL_MAX = 3  # the window being walked, the one being prefetched, a spare: reused, so their pages fault in once


def _take(size: int) -> Any:
    with _pool_lock:
        fits = [b for b in _pool if len(b) >= size]
        if fits:
            buf = min(fits, key=len)
            _pool.remove(buf)
            return buf
    return mmap.mmap(-1, max(size, 1))


def _give_back(buf: Any) -> None:
    with _pool_lock:
        if len(_pool) < POOL_MAX:
            _pool.append(buf)
            return
    buf.close()


class RemoteWindow:
    """The bytes ``[lo, hi)`` of a snapshot segment, fetched from the broker: ``buf[0]`` is the segment's byte
    ``lo``. ``buf`` is a reused anonymous mapping at least ``hi - lo`` long; what lies past ``hi - lo`` is left
    over from earlier windows and never relied on (see ``split_io.over_split``)."""

    def __init__(self, remote: Remote, segment: str, bound: int, lo: int, hi: int) -> None:
        self.remote, self.segment, self.bound = remote, segment, bound
        self.lo = self.hi = lo
        self.buf: Any = _take(min(hi, bound) - lo)
        try:
            self.extend(hi)
        except BaseException:
            self.close()
            raise

    def extend(self, hi: int) -> None:
        """Fetch up to ``hi`` (capped at the bound)."""
        hi = min(hi, self.bound)
        if hi <= self.hi:
            return
        if hi - self.lo > len(self.buf):  # a bigger mapping, with what was fetched so far
            bigger = _take(hi - self.lo)
            bigger[:self.hi - self.lo] = self.buf[:self.hi - self.lo]
            _give_back(self.buf)
            self.buf = bigger
        view = memoryview(self.buf)
        try:
            fetch_into(self.remote, self.segment, self.hi, view[self.hi - self.lo:hi - self.lo])
        finally:
            view.release()
        self.hi = hi

    def close(self) -> None:
        if self.buf is not None:
            _give_back(self.buf)
            self.buf = None
