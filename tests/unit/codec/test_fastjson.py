"""fastjson's forms: unquoted integer keys, object keys, pretty tabs; round trips through our reader."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.codec.fastjson import FastjsonPairs, dumps_fastjson, items, loads_fastjson


def test_integer_and_object_keys() -> None:
    assert dumps_fastjson({"offsetTable": {0: 12, 1: 7}}) == '{"offsetTable":{0:12,1:7}}'
    mq = (("brokerName", "b"), ("queueId", 0), ("topic", "t"))
    assert dumps_fastjson(FastjsonPairs([(mq, 5)])) == '{{"brokerName":"b","queueId":0,"topic":"t"}:5}'
    assert items(loads_fastjson('{{"brokerName":"b","queueId":0,"topic":"t"}:5}')) == [(mq, 5)]
    assert dumps_fastjson({"a": "é"}) == '{"a":"é"}'


def test_pretty_is_tabbed_without_spaces() -> None:
    text = dumps_fastjson({"t": {0: 1}, "l": [True, None], "e": {}}, pretty=True)
    assert text == '{\n\t"t":{\n\t\t0:1\n\t},\n\t"l":[\n\t\ttrue,\n\t\tnull\n\t],\n\t"e":{}\n}'


def test_rejects_unsupported() -> None:
    with pytest.raises(TypeError):
        dumps_fastjson({1.5: 1})
    with pytest.raises(TypeError):
        dumps_fastjson(object())


scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=8)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c,
                                                                                    max_size=4), max_leaves=12)


@given(st.dictionaries(st.integers(0, 100), st.integers(), max_size=5), values, st.booleans())
def test_round_trip(int_keyed: dict[int, int], value: object, pretty: bool) -> None:
    doc = {"ints": int_keyed, "v": value}
    back = loads_fastjson(dumps_fastjson(doc, pretty))
    assert dict(items(back["ints"])) == int_keyed
    assert back["v"] == value
