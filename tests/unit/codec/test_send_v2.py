"""``v2_message`` (the broker's single send, codec/send_v2.py) in C against its pure twin: the same message, slot by
slot, or both None, or the same exception type, for header letters as clients send them and as they should not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.codec import send_v2
from broker_core.codec.message import encode_properties
from broker_core.store.message import MessageInner

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

INTS = st.one_of(
    st.integers(-5, 20).map(str),
    st.sampled_from(["", " 3 ", "1_0", "\u0663", "+2", "x", "1.5", "2147483647", "2147483648", "-2147483648",
                     "-2147483649", "9223372036854775807", "9223372036854775808", "99999999999999999999999", "4",
                     "8", "12", "-0", "007", "-", "--1", "1-", "999999999999999999", "-999999999999999999",
                     "1000000000000000000", "0x10"]),
)
PROPERTY_VALUES = st.sampled_from(["", "v", "true", "false", "3", "-2", "x", "99999999999999999999999", "\u00fc"])
PROPERTY_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT", "CLUSTER", "TRAN_MSG", "a", "\u00e9",
                                  "TIMER_DELAY_MS"])


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    h: dict[str, Any] = {"b": draw(st.sampled_from(["T", "Orders", "\u00dc", "t" * 127, "t" * 128, "", "\U0001F600"]))}
    for letter in "efghj":
        if draw(st.booleans()) or letter == "e":
            h[letter] = draw(INTS)
    props = draw(st.dictionaries(PROPERTY_NAMES, PROPERTY_VALUES, max_size=6))
    if draw(st.booleans()):
        h["i"] = encode_properties(props).decode()
    elif draw(st.booleans()):
        h["i"] = ""
    if draw(st.integers(0, 20)) == 0:
        h["i"] = "x\x01" + "y" * 40000  # over the properties limit once CLUSTER is added
    return h


def fields(msg: Any) -> Any:
    if msg is None:
        return None
    return {name: (type(getattr(msg, name)), getattr(msg, name)) for name in MessageInner.__slots__}


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return fields(fn(*args))
    except Exception as exc:  # noqa: BLE001 - the same type from both is what is compared
        return type(exc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headers(), st.binary(max_size=64), st.integers(1, 8), st.sampled_from(["DefaultCluster", "c\u00fc"]),
       st.integers(0, 65535))
def test_native_equals_pure(h: dict[str, Any], body: bytes, queues: int, cluster: str, port: int) -> None:
    args = (MessageInner, h, body, queues, cluster, b"\x0a\x00\x00\x07", port)
    assert outcome(native.v2_message, *args) == outcome(send_v2.py_v2_message, *args)


def test_a_plain_send_gives_the_message_the_general_path_builds() -> None:
    props = {"UNIQ_KEY": "7F00000100002A9F0000000000000001", "KEYS": "k1 k2", "TAGS": "TagA", "WAIT": "true"}
    h = {"b": "Orders", "e": "3", "f": "0", "g": "1700000000000", "h": "0", "i": encode_properties(props).decode(),
         "j": "2"}
    for fn in (native.v2_message, send_v2.py_v2_message):
        msg = fn(MessageInner, h, b"body", 4, "DefaultCluster", b"\x0a\x00\x00\x07", 5555)
        want_props = {"UNIQ_KEY": props["UNIQ_KEY"], "KEYS": "k1 k2", "TAGS": "TagA", "CLUSTER": "DefaultCluster"}
        want = MessageInner.from_encoded("Orders", b"body", 3, encode_properties(want_props), want_props,
                                         born_timestamp=1_700_000_000_000, born_host=b"\x0a\x00\x00\x07",
                                         born_port=5555, reconsume_times=2)
        assert fields(msg) == fields(want)
        assert msg.properties == want_props and msg.tags == "TagA" and not msg.limits_error


@pytest.mark.parametrize(("letters", "why"), [
    ({"e": "4"}, "queue id not below writeQueueNums"),
    ({"e": "-1"}, "negative queue id"),
    ({"e": "q"}, "queue id not an int"),
    ({"f": "4"}, "a prepared transaction's sysFlag"),
    ({"f": "2147483648"}, "sysFlag outside i32"),
    ({"g": "9223372036854775808"}, "born timestamp outside i64"),
    ({"i": "TRAN_MSG\x01true\x02"}, "a prepared transaction message"),
    ({"i": "TIMER_DELIVER_MS\x011700000000000\x02"}, "a timer message (deliver at)"),
    ({"i": "a\x01b\x02TIMER_DELAY_SEC\x015\x02"}, "a timer message (delay in seconds)"),
    ({"i": "TIMER_DELAY_MS\x01\x02"}, "a timer message (delay in ms, even empty: the timer refuses it)"),
])
def test_what_the_general_path_decides(letters: dict[str, str], why: str) -> None:
    h = {"b": "T", "e": "0", **letters}
    for fn in (native.v2_message, send_v2.py_v2_message):
        assert fn(MessageInner, h, b"x", 4, "C", b"\x00" * 4, 0) is None, why


def test_a_factory_without_slots_is_refused() -> None:
    class Loose:
        @classmethod
        def from_encoded(cls, *args: Any, **kw: Any) -> Loose:
            return cls()

    with pytest.raises(TypeError):
        native.v2_message(Loose, {"b": "T", "e": "0"}, b"x", 4, "C", b"\x00" * 4, 0)
