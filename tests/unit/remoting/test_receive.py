"""remoting/receive.py's BytesReceiver: the C twin (``_native.BytesReceiver``) and the pure one receive the same
bytes with the same counts from the same socket, however the peer splits them, and fail alike: end of stream
is 0, an expired SO_RCVTIMEO is BlockingIOError, a prefix longer than the size, an early take and a second take
are ValueError. (The blocking transport's use of it: test_blocking_frames.py.)"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.remoting.receive import PyBytesReceiver

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")
KINDS: list[Callable[..., Any]] = [PyBytesReceiver, native.BytesReceiver]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def _run(kind: Callable[..., Any], size: int, prefix: bytes, pieces: list[bytes], flags: int) -> tuple[Any, ...]:
    """Send ``pieces`` (all fit the socket buffer), then receive until full: the counts, ``filled`` after each,
    and the bytes taken."""
    a, b = socket.socketpair()
    with a, b:
        for piece in pieces:
            a.sendall(piece)
        r = kind(size, prefix)
        counts, fills = [], [r.filled]
        while r.filled < r.size:
            counts.append(r.recv(b, flags))
            fills.append(r.filled)
        return tuple(counts), tuple(fills), r.take()


@FAST
@given(data=st.binary(max_size=20_000), cut=st.integers(0, 20_000), splits=st.lists(st.integers(1, 5000), max_size=6),
       waitall=st.booleans())
def test_both_twins_receive_the_same_bytes_with_the_same_counts(data: bytes, cut: int, splits: list[int],
                                                              waitall: bool) -> None:
    cut = min(cut, len(data))
    prefix, rest = data[:cut], data[cut:]
    pieces, pos = [], 0
    for n in splits:
        pieces.append(rest[pos:pos + n])
        pos += n
    pieces.append(rest[pos:])
    flags = socket.MSG_WAITALL if waitall else 0
    pure, fast = (_run(kind, len(data), prefix, pieces, flags) for kind in KINDS)
    assert pure == fast
    assert fast[2] == data and type(fast[2]) is bytes


@pytest.mark.parametrize("kind", KINDS, ids=["pure", "native"])
def test_end_of_stream_is_zero_and_an_early_take_is_refused(kind: Callable[..., Any],
                                                             pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    r = kind(10, b"ab")
    a.sendall(b"cde")
    a.shutdown(socket.SHUT_WR)
    assert r.recv(b, socket.MSG_WAITALL) == 3 and r.filled == 5
    assert r.recv(b) == 0 and r.filled == 5
    with pytest.raises(ValueError, match="5 of 10 bytes"):
        r.take()


@pytest.mark.parametrize("kind", KINDS, ids=["pure", "native"])
def test_an_expired_receive_timeout_is_blocking_io_error(kind: Callable[..., Any],
                                                         pair: tuple[socket.socket, socket.socket]) -> None:
    _, b = pair
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("@ll", 0, 20_000))  # 20 ms
    r = kind(4, b"")
    with pytest.raises(BlockingIOError):
        r.recv(b, socket.MSG_WAITALL)
    assert r.filled == 0


@pytest.mark.parametrize("kind", KINDS, ids=["pure", "native"])
def test_misuse_is_value_error_and_a_closed_socket_ebadf(kind: Callable[..., Any],
                                                         pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    with pytest.raises(ValueError, match="longer than the size"):
        kind(2, b"abc")
    r = kind(3, b"abc")
    assert r.take() == b"abc"
    with pytest.raises(ValueError, match="already taken"):
        r.take()
    a.sendall(b"x")
    with pytest.raises(ValueError, match="already taken"):
        r.recv(b)
    b.close()
    with pytest.raises(OSError) as closed:  # a closed socket: EBADF, as socket.recv_into says
        kind(1, b"").recv(b)
    assert closed.value.errno == errno.EBADF



def _fill_run(kind: Callable[..., Any], size: int, prefix: bytes, steps: list[tuple[str, bytes]]) -> list[Any]:
    """Apply ``fill(data)`` / a write into ``into()`` + ``advance`` steps: every count, ``len`` and ``filled`` seen,
    and the bytes taken (or the error)."""
    r = kind(size, prefix)
    seen: list[Any] = [len(r)]
    for how, data in steps:
        if how == "fill":
            seen.append(r.fill(data))
        else:
            with memoryview(r.into()) as target:
                n = min(len(data), len(target))
                target[:n] = data[:n]
            r.advance(n)
            seen.append(n)
        seen.append((len(r), r.filled))
    try:
        seen.append(r.take())
    except ValueError as exc:
        seen.append(str(exc))
    seen.append(len(r))
    return seen


@FAST
@given(size=st.integers(0, 300), cut=st.integers(0, 300),
       steps=st.lists(st.tuples(st.sampled_from(["fill", "into"]), st.binary(max_size=120)), max_size=6))
def test_both_twins_fill_and_read_into_alike(size: int, cut: int, steps: list[tuple[str, bytes]]) -> None:
    prefix = bytes(range(256))[:min(cut, size)]
    assert _fill_run(PyBytesReceiver, size, prefix, steps) == _fill_run(native.BytesReceiver, size, prefix, steps)


@pytest.mark.parametrize("kind", KINDS, ids=["pure", "native"])
def test_advance_past_the_end_and_use_after_take_are_value_errors(kind: Callable[..., Any]) -> None:
    r = kind(4, b"ab")
    with pytest.raises(ValueError, match="cannot advance"):
        r.advance(3)
    with pytest.raises(ValueError, match="cannot advance"):
        r.advance(-1)
    assert r.fill(b"cdef") == 2 and r.fill(b"x") == 0 and len(r) == 0
    assert r.take() == b"abcd"
    for call in (lambda: r.fill(b"x"), r.into, lambda: r.advance(0)):
        with pytest.raises(ValueError, match="already taken"):
            call()
