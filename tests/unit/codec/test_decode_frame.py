"""``decode_frame`` (codec/wire.py and its C twin): one whole ROCKETMQ-binary frame to a command in one call, None
for anything else, and for every frame the general decoder refuses (which then says why). Both twins must give
equal commands for any bytes, and a command equal to what ``FrameDecoder``'s general path decodes."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import wire
from broker_core.errors import ProtocolError
from broker_core.protocol.command import LANGUAGES, FrameDecoder, RemotingCommand, decode_command

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX = 1 << 16


def both(data: Any, max_frame: int = MAX) -> Any:
    got = native.decode_frame(data, max_frame, RemotingCommand, LANGUAGES, "OTHER")
    want = wire.py_decode_frame(data, max_frame, RemotingCommand, LANGUAGES, "OTHER")
    assert got == want
    return got


def general(data: bytes, max_frame: int = MAX) -> RemotingCommand | Exception:
    """What the decoder's general path makes of ``data`` (as if it had arrived in two reads)."""
    decoder = FrameDecoder(max_frame)
    try:
        cmds = decoder.feed(data[:1]) + decoder.feed(data[1:])
    except ProtocolError as exc:
        return exc
    assert len(cmds) == 1
    return cmds[0]


frames = st.builds(
    lambda code, lang, version, opaque, flag, remark, ext, body: wire.py_encode_binary_frame(
        code, lang, version, opaque, flag, remark, ext, body),
    st.integers(-(1 << 15), (1 << 15) - 1), st.integers(0, 20), st.integers(-(1 << 15), (1 << 15) - 1),
    st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 31), (1 << 31) - 1),
    st.one_of(st.none(), st.text(max_size=20)),
    st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=8), st.binary(max_size=300))


@FAST
@given(frames)
def test_a_whole_frame_decodes_as_the_general_path_does(frame: bytes) -> None:
    cmd = both(frame)
    assert cmd is not None and cmd == general(frame)
    assert cmd.serialize_type == wire.SERIALIZE_ROCKETMQ and cmd.remark is not None
    if frame[6] >= len(LANGUAGES):  # an ordinal past the known languages
        assert cmd.language == "OTHER"


@FAST
@given(frames, st.data())
def test_damaged_frames_are_left_to_the_general_path(frame: bytes, data: st.DataObject) -> None:
    broken = bytearray(frame)
    at = data.draw(st.integers(0, len(broken) - 1))
    broken[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(broken)))
    for raw in (bytes(broken), bytes(broken[:cut]), bytes(broken) + b"\x00", frame + frame):
        cmd = both(raw)
        if cmd is not None:  # taken only when the general path decodes the same command
            assert len(raw) >= 8 and cmd == general(raw)


@FAST
@given(st.binary(max_size=80))
def test_noise(raw: bytes) -> None:
    both(raw)


def test_what_is_not_taken() -> None:
    cmd = RemotingCommand(310, 7, 0, {"b": "T"}, b"body", serialize_type=wire.SERIALIZE_ROCKETMQ)
    frame = cmd.encode()
    assert both(frame) == cmd
    assert both(bytearray(frame)) is None  # not bytes
    assert both(frame, max_frame=len(frame) - 1) is None  # over the limit: the general path refuses it
    assert isinstance(general(frame, len(frame) - 1), ProtocolError)
    json_frame = RemotingCommand(310, 7, 0, {"b": "T"}, b"body").encode()  # a JSON header
    assert both(json_frame) is None and decode_command(wire.SERIALIZE_JSON, json_frame[8:8 + struct.unpack(
        ">I", json_frame[4:8])[0]], b"body").header == {"b": "T"}
    bad_utf8 = bytearray(frame)
    at = bytes(bad_utf8).index(b"T", 8)
    bad_utf8[at] = 0xFF  # the topic's text is not UTF-8
    assert both(bytes(bad_utf8)) is None and isinstance(general(bytes(bad_utf8)), ProtocolError)
    assert FrameDecoder(MAX).feed(frame) == [cmd]
