"""``encode_send_ok`` (codec/wire.py and its C twin): the answer to a stored send, byte for byte what the general
encoder makes of the same map, for any arguments; what the fast path cannot take goes through the general encoder
(same errors)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import wire
from broker_core.codec.message_id import encode_offset_msg_id
from broker_core.protocol.command import FrameDecoder

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def both(*args: Any) -> Any:
    try:
        want = wire.py_encode_send_ok(*args)
    except Exception as exc:  # noqa: BLE001 - the C twin must raise the same type
        with pytest.raises(type(exc)):
            native.encode_send_ok(*args)
        return exc
    assert native.encode_send_ok(*args) == want
    return want


@FAST
@given(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(0, 12), st.integers(-(1 << 15), (1 << 15) - 1),
       st.binary(min_size=4, max_size=4), st.integers(-(1 << 31), (1 << 31) - 1), st.integers(0, 1 << 62),
       st.integers(0, 1 << 20), st.integers(-1, 1 << 62), st.text(max_size=20), st.sampled_from(["true", "false"]))
def test_equal_to_the_general_encoder(opaque: int, lang: int, version: int, host: bytes, port: int, phy: int,
                                      qid: int, qoff: int, region: str, trace: str) -> None:
    frame = both(opaque, lang, version, host, port, phy, qid, qoff, region, trace)
    (cmd,) = FrameDecoder().feed(frame)
    assert (cmd.code, cmd.opaque, cmd.flags, cmd.version, cmd.body) == (0, opaque, 1, version, b"")
    assert cmd.header == {"msgId": encode_offset_msg_id(host, port, phy), "queueId": str(qid),
                          "queueOffset": str(qoff), "MSG_REGION": region, "TRACE_ON": trace}


@pytest.mark.parametrize("args", [
    (1 << 31, 3, 409, b"\x7f\0\0\1", 10911, 5, 0, 1, "R", "true"),  # opaque past an int
    (1, 256, 409, b"\x7f\0\0\1", 10911, 5, 0, 1, "R", "true"),  # language past a byte
    (1, 3, 1 << 15, b"\x7f\0\0\1", 10911, 5, 0, 1, "R", "true"),  # version past a short
    (1, 3, 409, b"\x7f\0\0", 10911, 5, 0, 1, "R", "true"),  # host of 3 bytes
    (1, 3, 409, b"\x7f\0\0\1", 10911, 5, 0, 1, 7, "true"),  # region not text
    (1, 3, 409, b"\x7f\0\0\1", 10911, 5, True, 1 << 70, "R", "true"),  # a bool, an offset past i64
    (1, 3, 409, b"\x7f\0\0\1", 10911, 5, 0, 1, "\ud800", "true"),  # not encodable as UTF-8
    (1, 3, 409, b"\x7f\0\0\1", 1 << 31, 5, 0, 1, "R", "true"),  # port past an int
    (1, 3, 409, b"\x7f\0\0\1", 10911, 1 << 63, 0, 1, "R", "true"),  # offset past a long
    (1, 3, 409, b"\x7f\0\0\1", "10911", 5, 0, 1, "R", "true"),  # port not a number
    (1, 3, 409, bytearray(b"\x7f\0\0\1"), 10911, 5, 0, 1, "R", "true"),  # another buffer
])
def test_what_the_fast_path_does_not_take_is_the_general_encoders(args: tuple[Any, ...]) -> None:
    both(*args)


def test_the_broker_answer_layout() -> None:
    frame = native.encode_send_ok(7, 3, 409, b"\x7f\0\0\1", 10911, 1234, 2, 99, "DefaultRegion", "true")
    length, word = struct.unpack_from(">II", frame)
    assert length + 4 == len(frame) and word >> 24 == 1

