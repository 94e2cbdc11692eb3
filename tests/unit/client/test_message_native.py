"""MessageExt built by the C decoder (``decode_pulled`` filling ``__native_slots__`` directly) equals MessageExt built
by its ``__init__`` (the pure decoder calls it), for any records; a subclass, or a class without
``__native_slots__``, is still called; natively built messages are left out of the cycle collector; a class whose
``__native_slots__`` names something that is not a slot is refused with TypeError. Both decoders hand over the
properties as their stored bytes, decoded on first use: equal for odd inputs too (separators missing or doubled,
empty names and values, bytes that are not UTF-8, zero-length bodies, compressed bodies, a batch cut anywhere)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.client.message import MessageExt
from broker_core.codec import message
from broker_core.codec import records as walks

native = pytest.importorskip("broker_core.codec._native", reason="the extension is built by `make`")

SLOTS = MessageExt.__native_slots__

record = st.builds(
    lambda topic, body, props, uniq, qid, qoff, phy, ts: message.encode_record(
        topic=topic, body=body, properties={**props, **({"UNIQ_KEY": uniq} if uniq is not None else {})},
        queue_id=qid, queue_offset=qoff, physical_offset=phy, born_timestamp=ts, store_timestamp=ts + 1,
        born_host=f"10.0.0.{qid % 250}:1234", store_host="192.168.1.2:10911", reconsume_times=qid % 7),
    st.sampled_from(["T", "Topic-ü", "x" * 100]), st.binary(max_size=64),
    st.dictionaries(st.sampled_from(["TAGS", "KEYS", "CLUSTER", "WAIT", "ü-name", "k" * 60]),
                    st.text(max_size=70), max_size=4),
    st.one_of(st.none(), st.text(alphabet="0123456789ABCDEF", min_size=0, max_size=32)),
    st.integers(0, 1000), st.integers(0, 1 << 40), st.integers(0, 1 << 40), st.integers(0, 1 << 42))


def _fields(m: Any) -> dict[str, Any]:
    return {name: getattr(m, name) for name in MessageExt.__slots__}


def _outcome(decode: Callable[..., Any], buf: bytes) -> Any:
    """The messages' fields and decoded properties (or the error) ``decode`` gives for ``buf``."""
    try:
        msgs = decode(buf, "pull", MessageExt, "b")
    except Exception as exc:  # noqa: BLE001 - compared between the twins
        return (type(exc), str(exc))
    out = []
    for m in msgs:
        fields = _fields(m)
        try:
            fields["properties"] = m.properties
        except UnicodeDecodeError as exc:
            fields["properties"] = (type(exc), str(exc))
        out.append(fields)
    return out


def _raw_record(props: bytes, body: bytes = b"", sys_flag: int = 0, phy: int = 0) -> bytes:
    """A record with ``props`` stored as they are (encode_record would encode a dict)."""
    tail = message.encode_tail(b"T", props)
    total = message.HEADER_SIZE + len(body) + len(tail)
    out = bytearray(total)
    message.write_record_into(out, 0, total, message.body_crc(body), 1, 0, 5, phy, sys_flag, 1, b"\x7f\0\0\1", 9, 2,
                              b"\x7f\0\0\1", 10911, 0, 0, body, tail)
    return bytes(out)


ODD_PROPERTIES = [b"", b"a\x01b", b"a\x01b\x02\x02", b"\x02\x02\x02", b"noval\x02", b"k\x01v\x01w\x02",
                  b"\x01v\x02", b"k\x01\x02", b"UNIQ_KEY\x01\x02", b"UNIQ_KEY\x01AB\x02UNIQ_KEY\x01CD\x02",
                  "ü\x01é\x02".encode(), b"\xff\xfe\x01x\x02", b"TAGS\x01a\x80\x02", b"x" * 300]


@pytest.mark.parametrize("props", ODD_PROPERTIES)
def test_odd_properties_zero_length_and_compressed_bodies_decode_alike(props: bytes) -> None:
    import zlib

    buf = (_raw_record(props) + _raw_record(props, b"body", phy=200)
           + _raw_record(props, zlib.compress(b"z" * 500), message.COMPRESSED_FLAG, phy=400))
    pure, c = _outcome(walks.py_decode_pulled, buf), _outcome(native.decode_pulled, buf)
    assert c == pure
    assert [m["body"] for m in c] == [b"", b"body", b"z" * 500]
    assert all(m["_props"] == props for m in c)
    try:
        want: Any = message.py_decode_properties(props)
    except UnicodeDecodeError as exc:
        want = (type(exc), str(exc))
    assert all(m["properties"] == want for m in c)


def test_a_batch_cut_anywhere_decodes_alike() -> None:
    buf = _raw_record(b"UNIQ_KEY\x01AB\x02", b"abc") + _raw_record(b"TAGS\x01t\x02", b"", phy=120)
    for cut in range(len(buf) + 1):
        assert _outcome(native.decode_pulled, buf[:cut]) == _outcome(walks.py_decode_pulled, buf[:cut]), cut


def test_properties_are_decoded_on_first_use_and_can_be_replaced() -> None:
    buf = message.encode_record(topic="T", body=b"x", properties={"UNIQ_KEY": "AB", "TAGS": "t", "KEYS": "k1 k2"})
    for decode in (walks.py_decode_pulled, native.decode_pulled):
        (m,) = decode(buf, "pull", MessageExt, "b")
        assert type(m._props) is bytes  # nothing decoded by the pull
        assert m.msg_id == "AB" and m.tags == "t" and m.keys == ["k1", "k2"]
        assert m._props == {"UNIQ_KEY": "AB", "TAGS": "t", "KEYS": "k1 k2"}  # decoded once, kept
        m.properties = {"TAGS": "u"}
        assert m.tags == "u" and m.msg_id == m.offset_msg_id  # no UNIQ_KEY any more: the offset id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, max_size=6))
def test_native_slots_equal_init(records: list[bytes]) -> None:
    buf = b"".join(records)
    built = walks.py_decode_pulled(buf, "pull", MessageExt, "broker-a")
    filled = native.decode_pulled(buf, "pull", MessageExt, "broker-a")
    assert [_fields(m) for m in filled] == [_fields(m) for m in built]
    assert all(type(m) is MessageExt for m in filled)
    assert all(m.msg_id == b.msg_id and m.offset_msg_id == b.offset_msg_id for m, b in zip(filled, built, strict=True))


def test_natively_built_messages_are_not_tracked_by_the_cycle_collector() -> None:
    buf = message.encode_record(topic="T", body=b"x", properties={"UNIQ_KEY": "AB"})
    (m,) = native.decode_pulled(buf, "pull", MessageExt, "b")
    assert not gc.is_tracked(m)
    assert not gc.is_tracked(m._born) and not gc.is_tracked(m._store)
    assert gc.is_tracked(MessageExt("T", b"", 0, 0, 0, 0, 0, (b"", 0), (b"", 0), 0, "b", {}))  # __init__ way


def test_subclasses_and_plain_factories_are_called() -> None:
    calls: list[tuple[Any, ...]] = []

    class Traced(MessageExt):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            calls.append(args)
            super().__init__(*args)

    buf = message.encode_record(topic="T", body=b"x", properties={"UNIQ_KEY": "AB", "TAGS": "t"}) * 2
    got = native.decode_pulled(buf, "pull", Traced, "b")
    assert len(calls) == 2 and all(type(m) is Traced for m in got)
    assert got[0].msg_id == "AB" and got[0].tags == "t"
    assert native.decode_pulled(buf, "pull", lambda *a: a, "b")[0][0] == "T"


def test_native_slots_that_are_not_slots_are_refused() -> None:
    class Bad:
        __slots__ = ("a",)
        __native_slots__ = ("a", "nope", *("a",) * 12)
        nope = 1

    buf = message.encode_record(topic="T", body=b"x")
    with pytest.raises(TypeError, match="not a writable slot"):
        native.decode_pulled(buf, "pull", Bad, "b")
