"""Frames of RocketMQ 4.x remoting, checked against byte layouts written here from the reference (§1.1, §1.3,
§1.4, §3.3), not from our encoder: both header serializations, round trips, splits, garbage."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.codec import CodecError
from broker_core.codec.wire import SERIALIZE_JSON, SERIALIZE_ROCKETMQ, decode_batch, encode_batch
from broker_core.protocol import FrameDecoder, ProtocolError, RemotingCommand, RequestCode
from broker_core.protocol.filter import SubscriptionParseError, parse_subscription
from broker_core.protocol.validation import group_error, topic_error


def java_json_frame(obj: dict, body: bytes = b"") -> bytes:
    """A frame as the Java client writes it: length, header word with type 0, fastjson header, body."""
    header = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def binary_frame(code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes,
                 ext: list[tuple[bytes, bytes]], body: bytes = b"") -> bytes:
    """A ROCKETMQ-typed frame laid out field by field from reference §1.4."""
    block = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    header = (struct.pack(">hBhii", code, lang, version, opaque, flag) + struct.pack(">i", len(remark)) + remark
              + struct.pack(">i", len(block)) + block)
    return struct.pack(">ii", 4 + len(header) + len(body), (1 << 24) | len(header)) + header + body


def test_java_send_v2_frame_decodes():
    raw = java_json_frame({"code": 310, "extFields": {"a": "pg", "b": "TopicTest", "e": "2", "k": "false"},
                           "flag": 0, "language": "JAVA", "opaque": 3, "serializeTypeCurrentRPC": "JSON",
                           "version": 409}, b"hello")
    (cmd,) = FrameDecoder().feed(raw)
    assert (cmd.code, cmd.opaque, cmd.flags, cmd.language, cmd.version, cmd.body) == (310, 3, 0, "JAVA", 409, b"hello")
    assert cmd.header == {"a": "pg", "b": "TopicTest", "e": "2", "k": "false"}
    assert cmd.serialize_type == SERIALIZE_JSON


def test_json_scalars_become_text_as_fastjson_does():
    """C++ sends some V2 fields as JSON ints, ali-ons sends booleans; handlers always see strings."""
    raw = java_json_frame({"code": 310, "extFields": {"d": 4, "e": -1, "k": True, "m": False, "x": None,
                                                      "AccessKey": ""}, "flag": 0, "opaque": 9}, b"")
    (cmd,) = FrameDecoder().feed(raw)
    assert cmd.header == {"d": "4", "e": "-1", "k": "true", "m": "false", "AccessKey": ""}
    assert cmd.remark == "" and cmd.language == "OTHER"


def test_json_response_layout_matches_reference():
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T", "e": 1, "k": False}, b"body")
    req.opaque = 7
    raw = req.encode()
    length, word = struct.unpack_from(">ii", raw)
    assert length == len(raw) - 4 and word >> 24 == 0
    hlen = word & 0xFFFFFF
    header = json.loads(raw[8:8 + hlen])
    assert raw[8 + hlen:] == b"body"
    assert header == {"code": 310, "extFields": {"b": "T", "e": "1", "k": "false"}, "flag": 0, "language": "PYTHON",
                      "opaque": 7, "serializeTypeCurrentRPC": "JSON", "version": 409}
    resp = req.response(0, "", {"queueId": 3, "msgId": "AB"})
    raw = resp.encode()
    header = json.loads(raw[8:8 + (struct.unpack_from(">i", raw, 4)[0] & 0xFFFFFF)])
    assert header["flag"] == 1 and header["opaque"] == 7 and "remark" not in header
    assert header["extFields"] == {"queueId": "3", "msgId": "AB"}  # strings only: Go decodes map[string]string


def test_binary_frame_decodes_and_response_mirrors_type():
    raw = binary_frame(11, 9, 317, 42, 2, b"", [(b"topic", b"T"), (b"queueId", b"0"), (b"topic", b"T2")], b"xy")
    (cmd,) = FrameDecoder().feed(raw)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flags, cmd.body) == (11, "GO", 317, 42, 2, b"xy")
    assert cmd.header == {"topic": "T2", "queueId": "0"}  # a repeated key: last wins
    assert cmd.serialize_type == SERIALIZE_ROCKETMQ and cmd.is_oneway
    resp = cmd.response(19, "no new message", {"nextBeginOffset": 5})
    out = resp.encode()
    assert out == binary_frame(19, 3, 409, 42, 1, b"no new message", [(b"nextBeginOffset", b"5")])


def test_binary_falls_back_to_json_for_codes_past_i16():
    cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, {"topic": "T"})
    cmd.serialize_type = SERIALIZE_ROCKETMQ
    raw = cmd.encode()
    assert struct.unpack_from(">i", raw, 4)[0] >> 24 == 0
    (back,) = FrameDecoder().feed(raw)
    assert back.code == 200050


def test_batch_layout_matches_reference():
    raw = encode_batch([(5, b"one", b"KEYS\x01k1")])
    assert raw == struct.pack(">iiiii", 22 + 3 + 7, 0, 0, 5, 3) + b"one" + struct.pack(">h", 7) + b"KEYS\x01k1"
    assert decode_batch(raw) == [(5, b"one", b"KEYS\x01k1")]
    with pytest.raises(CodecError, match="batch"):
        decode_batch(raw[:-1])


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), st.binary(max_size=100)),
                max_size=20))
def test_batch_round_trip(entries):
    assert decode_batch(encode_batch(entries)) == entries


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_fields = st.dictionaries(_text.filter(bool), st.one_of(_text, st.integers(-(2**63), 2**63 - 1), st.booleans()),
                          max_size=8)


@given(st.lists(st.tuples(st.sampled_from(list(RequestCode)), _fields, st.binary(max_size=500), _text,
                          st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ])), min_size=1, max_size=10),
       st.integers(1, 97))
def test_decoder_reassembles_any_split_in_both_serializations(commands, chunk):
    stream = b""
    for i, (code, header, body, remark, stype) in enumerate(commands):
        cmd = RemotingCommand.request(code, header, body)
        cmd.opaque, cmd.remark, cmd.serialize_type = i, remark, stype
        stream += cmd.encode()
    dec = FrameDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out += dec.feed(stream[i:i + chunk])

    def text(v):
        return v if isinstance(v, str) else ("true" if v else "false") if isinstance(v, bool) else str(v)

    assert [(c.code, c.opaque, c.header, c.body, c.remark) for c in out] == [
        (int(code), i, {k: text(v) for k, v in header.items()}, body, remark)
        for i, (code, header, body, remark, _st) in enumerate(commands)]
    assert dec.buffered == 0


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_decoder_never_fails_unexpectedly_on_garbage(data):
    dec = FrameDecoder(max_frame_bytes=1 << 20)
    try:
        dec.feed(data)
    except ProtocolError:
        pass


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=200))
def test_garbage_binary_headers_raise_protocol_error_only(header):
    raw = struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header
    try:
        FrameDecoder().feed(raw)
    except ProtocolError:
        pass


@pytest.mark.parametrize("raw,match", [
    (struct.pack(">ii", 1 << 30, 0), "exceeds the limit"),
    (struct.pack(">ii", 4 + 3, 3) + b"{x}", "does not parse"),
    (struct.pack(">ii", 4 + 2, 2) + b"[]", "not an object"),
    (struct.pack(">ii", 4 + 2, 2) + b"{}", "bad JSON command header field"),
    (struct.pack(">ii", 4, 5), "bad frame lengths"),
    (struct.pack(">ii", 4, 2 << 24), "unknown serialize type"),
    (struct.pack(">ii", 4 + 21, (1 << 24) | 21) + struct.pack(">hBhiii", 10, 0, 0, 1, 0, 99) + b"\0" * 4,
     "remark length"),
    (struct.pack(">ii", 4 + 21, (1 << 24) | 21) + struct.pack(">hBhiii", 10, 0, 0, 1, 0, 0) + struct.pack(">i", 9),
     "extFields length"),
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
