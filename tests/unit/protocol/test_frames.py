from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.codec import CodecError
from broker_core.codec.wire import FRAME_HEADER_SIZE, decode_batch, encode_batch, encode_frame
from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand, RequestCode
from broker_core.protocol.filter import SubscriptionParseError, parse_subscription
from broker_core.protocol.validation import group_error, topic_error
from tests.conftest import GOLDEN


def test_frame_layout_and_golden():
    assert FRAME_HEADER_SIZE == 16
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T", "queueId": 1}, b"body")
    cmd.opaque = 7
    raw = cmd.encode()
    assert raw == (GOLDEN / "frame_send_message.bin").read_bytes()
    length, version, flags, code, opaque, hlen = struct.unpack_from(">IBBHII", raw)
    assert (length, version, flags, code, opaque) == (len(raw) - 4, 1, 0, 10, 7)
    assert raw[16:16 + hlen] == b'{"topic":"T","queueId":1}' and raw[16 + hlen:] == b"body"


def test_batch_golden_and_round_trip():
    entries = [(0, b"one", b"KEYS\x01k1\x02"), (3, b"", b"")]
    raw = encode_batch(entries)
    assert raw == (GOLDEN / "batch.bin").read_bytes()
    assert decode_batch(raw) == entries
    with pytest.raises(CodecError, match="batch"):
        decode_batch(raw[:-1])


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), st.binary(max_size=100)),
                max_size=20))
def test_batch_round_trip(entries):
    assert decode_batch(encode_batch(entries)) == entries


@given(st.lists(st.tuples(st.sampled_from(list(RequestCode)), st.dictionaries(st.text(max_size=8), st.integers()),
                          st.binary(max_size=500)), min_size=1, max_size=10), st.integers(1, 97))
def test_decoder_reassembles_any_split(commands, chunk):
    stream = b""
    for i, (code, header, body) in enumerate(commands):
        cmd = RemotingCommand.request(code, header, body)
        cmd.opaque = i
        stream += cmd.encode()
    dec = FrameDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out += dec.feed(stream[i:i + chunk])
    assert [(c.code, c.opaque, c.header, c.body) for c in out] == [
        (int(code), i, header, body) for i, (code, header, body) in enumerate(commands)]
    assert dec.buffered == 0


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_decoder_never_fails_unexpectedly_on_garbage(data):
    dec = FrameDecoder(max_frame_bytes=1 << 20)
    try:
        dec.feed(data)
    except ProtocolError:
        pass


@pytest.mark.parametrize("raw,match", [
    (encode_frame(10, 1, 0, b"") .replace(b"\x01", b"\x02", 1), None),
    (struct.pack(">IBBHII", 1 << 30, 1, 0, 10, 1, 0), "exceeds the limit"),
    (struct.pack(">IBBHII", 12 + 3, 1, 0, 10, 1, 3) + b"{x}", "not JSON"),
    (struct.pack(">IBBHII", 12 + 2, 1, 0, 10, 1, 2) + b"[]", "not a JSON object"),
    (struct.pack(">IBBHII", 11, 1, 0, 10, 1, 0), "bad frame lengths"),
])
def test_malformed_frames(raw, match):
    with pytest.raises(ProtocolError, match=match):
        FrameDecoder().feed(raw)


def test_names_and_subscriptions():
    assert topic_error("Orders_2-x") is None and topic_error("%RETRY%g") is None
    assert "may only contain" in topic_error("bad topic")
    assert "longer" in topic_error("t" * 128)
    assert group_error("") == "group name is empty"
    sub = parse_subscription("T", "TagA || TagB")
    assert sub.tags == {"TagA", "TagB"} and sub.matches("TagA") and not sub.matches("TagC")
    assert parse_subscription("T", "*").tags is None and parse_subscription("T", None).matches(None)
    with pytest.raises(SubscriptionParseError):
        parse_subscription("T", "A || ")
