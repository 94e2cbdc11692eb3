"""The store message of a plain SEND_MESSAGE_V2: the broker's fast send path (``server/send_fast.py``) turns the
request's header letters and body into a message in one call (``_native.v2_message`` in C, this function in pure
Python; tests/unit/codec/test_send_v2.py holds them equal, slot by slot).

:func:`v2_message` reads the V2 letters (``e`` queue id, ``f`` sysFlag, ``g`` bornTimestamp, ``h`` flag, ``i``
properties, ``j`` reconsumeTimes; ``b``, the topic, is the caller's), drops ``WAIT`` from the properties and sets
``CLUSTER`` (what the broker does since RocketMQ 4.9.1), and builds the message as ``factory.from_encoded`` does
(``store/message.py``: the factory is ``MessageInner``, passed in because the codec imports nothing of the store).

It answers None, so that the general send path decides with its own checks and errors, when a number is not an
int (``int()`` refuses it) or lies outside its record field (queue id outside ``[0, write_queue_nums)``, a sysFlag,
flag or reconsume count outside i32, a born timestamp outside i64), when the sysFlag has a transaction type, and
when the properties mark a prepared transaction message or a RocketMQ 5 timer message (``TIMER_DELIVER_MS``,
``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``: the general path hands it to the broker's timer). Other exceptions (a
header value of the wrong type, a topic that is not UTF-8 encodable) propagate as they would from the general
path's parsing.
"""

from __future__ import annotations

from typing import Any

from broker_core.codec.message import (
    TRANSACTION_TYPE_MASK,
    decode_properties,
    encode_properties,
)
from broker_core.codec.names import (
    PROPERTY_CLUSTER,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    TIMER_PROPERTIES,
)
from broker_core.codec.native import NATIVE

_I32 = range(-(1 << 31), 1 << 31)
_I64 = range(-(1 << 63), 1 << 63)


def v2_message(factory: Any, h: dict[str, Any], body: bytes, write_queue_nums: int, cluster: str,
               born_host: bytes, born_port: int) -> Any:
    """``factory.from_encoded(...)`` of the request, or None (see the module docstring)."""
    topic = h["b"]
    try:
        queue_id = int(h.get("e") or 0)
        sys_flag = int(h.get("f") or 0)
        born_ts = int(h.get("g") or 0)
        flag = int(h.get("h") or 0)
        reconsume = int(h.get("j") or 0)
    except ValueError:
        return None
    if (not 0 <= queue_id < write_queue_nums or sys_flag not in _I32 or sys_flag & TRANSACTION_TYPE_MASK
            or flag not in _I32 or reconsume not in _I32 or born_ts not in _I64):
        return None
    props = decode_properties(h.get("i") or "")
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true" or any(k in props for k in TIMER_PROPERTIES):
        return None
    props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
    props[PROPERTY_CLUSTER] = cluster
    return factory.from_encoded(topic, body, queue_id, encode_properties(props), props, flag=flag,
                                sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host, born_port=born_port,
                                reconsume_times=reconsume)


py_v2_message = v2_message
if NATIVE is not None:
    v2_message = NATIVE.v2_message
