"""ACL 1.0 request signatures (reference §9.2): expected signatures are computed here from content strings written
out by hand in Java ``TreeMap`` order, not with the module under test; frames from other clients are laid out
byte by byte."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct

import pytest

from broker_core.codec.wire import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode
from broker_core.protocol.acl import (
    CLUSTER_ACCESS_KEY,
    SIGN_TIMESTAMP,
    SessionCredentials,
    calc_signature,
    registration_refusal,
    sign_command,
    sign_registration,
    signature_matches,
    signing_content,
)

SECRET = "12345678-secret"


def hmac_b64(secret: str, data: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), data, hashlib.sha1).digest()).decode()


def test_calc_signature_is_base64_hmac_sha1() -> None:
    # RFC 2202 test case 2: HMAC-SHA1("Jefe", "what do ya want for nothing?")
    assert base64.b64decode(calc_signature("Jefe", b"what do ya want for nothing?")).hex() == \
        "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"


def test_java_send_v2_signature_vector() -> None:
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "TopicTest", "a": "pg", "e": 2, "k": False,
                                                                "d": 4}, b"hello")
    sign_command(cmd, SessionCredentials("RocketMQ", SECRET))
    # TreeMap order: "AccessKey" < "a" < "b" < "d" < "e" < "k" (upper case before lower case), values only
    expected = hmac_b64(SECRET, b"RocketMQ" b"pg" b"TopicTest" b"4" b"2" b"false" b"hello")
    assert cmd.header == {"a": "pg", "b": "TopicTest", "d": "4", "e": "2", "k": "false", "AccessKey": "RocketMQ",
                          "Signature": expected}


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, so Java sorts it before U+FF21 (code points: after), and
    # "é" (U+00E9) after every ASCII key
    header = {"\uff21": "fullwidth", "\U0001f600": "emoji", "é": "valeur-é", "z": "zed", "Z": "Zed"}
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, header, b"{}")
    sign_command(cmd, SessionCredentials("AK-unicode", SECRET, security_token="tok"))
    content = ("AK-unicode" "tok" "Zed" "zed" "valeur-é" "emoji" "fullwidth").encode() + b"{}"
    assert cmd.header["SecurityToken"] == "tok"
    assert cmd.header["Signature"] == hmac_b64(SECRET, content)
    assert signing_content(cmd.header, cmd.body) == content  # Signature itself is never signed


def test_signing_twice_gives_the_same_header() -> None:
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "t", "queueId": 1})
    creds = SessionCredentials("RocketMQ", SECRET)
    first = dict(sign_command(cmd, creds).header)
    assert sign_command(cmd, creds).header == first


@pytest.mark.parametrize("serialize_type", [SERIALIZE_JSON, SERIALIZE_ROCKETMQ])
def test_signed_request_verifies_after_the_wire_either_serialization(serialize_type: int) -> None:
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "t",
                                                                       "queueId": 3, "commitOffset": 42}, b"")
    sign_command(cmd, SessionCredentials("RocketMQ", SECRET))
    cmd.serialize_type = serialize_type
    (got,) = FrameDecoder().feed(cmd.encode())
    assert signature_matches(got.header, got.body, SECRET)
    assert not signature_matches(got.header, got.body, SECRET + "x")
    tampered = {**got.header, "commitOffset": "43"}
    assert not signature_matches(tampered, got.body, SECRET)
    assert not signature_matches(got.header, b"extra body", SECRET)


def test_broker_leaves_unique_key_query_out_and_needs_a_signature() -> None:
    cmd = sign_command(RemotingCommand.request(RequestCode.QUERY_MESSAGE, {"topic": "t", "key": "k"}),
                       SessionCredentials("RocketMQ", SECRET))
    assert signature_matches({**cmd.header, "_UNIQUE_KEY_QUERY": "true"}, b"", SECRET)
    unsigned = dict(cmd.header)
    del unsigned["Signature"]
    assert not signature_matches(unsigned, b"", SECRET)


def cpp_style_frame(body: bytes) -> bytes:
    """A C++ client's send (reference §1.3, §9.2): JSON header, V2 fields d,e,f,h,l as JSON ints, AccessKey and
    OnsChannel signed with the declared fields, the signature computed here over their text."""
    fields = {"a": "cpp-pg", "b": "CppTopic", "c": "TBW102", "d": 4, "e": 1, "f": 0, "g": "1700000000000",
              "h": 0, "i": "TAGS\u0001TagA", "j": "0", "k": "false", "l": 16, "m": "false"}
    text = {k: str(v) for k, v in fields.items()}
    ordered = ["RocketMQ", "ALIYUN"] + [text[k] for k in sorted(text)]  # AccessKey, OnsChannel, then a..m
    signature = hmac_b64(SECRET, "".join(ordered).encode() + body)
    obj = {"code": 310, "extFields": {**fields, "AccessKey": "RocketMQ", "OnsChannel": "ALIYUN",
                                      "Signature": signature},
           "flag": 0, "language": "CPP", "opaque": 7, "version": 333}
    header = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def test_cpp_style_request_with_json_ints_verifies() -> None:
    (cmd,) = FrameDecoder().feed(cpp_style_frame(b"cpp body"))
    assert cmd.header["d"] == "4" and cmd.header["OnsChannel"] == "ALIYUN"
    assert signature_matches(cmd.header, cmd.body, SECRET)
    assert not signature_matches(cmd.header, cmd.body, "another-secret")


def test_credentials_need_both_keys_and_hide_the_secret() -> None:
    with pytest.raises(ValueError):
        SessionCredentials("", SECRET)
    assert SECRET not in repr(SessionCredentials("RocketMQ", SECRET))


def test_registration_proof() -> None:
    now = 1_700_000_000_000
    header = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "c", "brokerId": 0}
    cmd = sign_registration(RemotingCommand.request(RequestCode.REGISTER_BROKER, header, b"{}"), SECRET, now)
    assert cmd.header["AccessKey"] == CLUSTER_ACCESS_KEY and cmd.header[SIGN_TIMESTAMP] == str(now)
    assert registration_refusal(cmd, SECRET, now + 1000) is None
    assert "does not match" in str(registration_refusal(cmd, "wrong-secret", now))
    assert "ms away" in str(registration_refusal(cmd, SECRET, now + 301_000))  # a replay, minutes later
    unsigned = RemotingCommand.request(RequestCode.REGISTER_BROKER, header, b"{}")
    assert "requires a broker registration signed" in str(registration_refusal(unsigned, SECRET, now))
    moved = RemotingCommand(cmd.code, 0, 0, {**cmd.header, "brokerAddr": "10.0.0.9:10911"}, cmd.body)
    assert "does not match" in str(registration_refusal(moved, SECRET, now))
