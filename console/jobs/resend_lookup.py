"""Finding, on the brokers, the copy a resend may have made: how an uncertain intent is settled.

The broker's RESEND_DEAD_LETTERS writes the copy to ``topic`` with ``ORIGIN_MESSAGE_ID`` = the dead letter's
message id, ``RESEND_FROM_DLQ=true``, a new unique id, and every KEYS value of the dead letter. The copy of one
intent is the oldest message of ``topic`` that carries that origin and flag, was stored no earlier than the
intent (less the allowed clock skew between us and the broker), and is not already recorded as another resend
of the same dead letter.

Two ways to look, both through the SDK:

1. By key (cheap and exact): every copy carries each of the dead letter's KEYS, and the brokers index keys, so a
   key query over [intent - skew, now] sees every candidate, unless the broker answers "truncated" (more
   messages with that key than asked), when we fall back to 2.
2. By time (dead letters without keys): read ``topic`` from the first message stored at intent - skew to its
   end (the console's time-range browse), and filter.

Both depend on the copy being dispatched to the index / ConsumeQueue, which the broker does before it answers a
key query or a pull (read-your-writes), so a copy stored before the lookup is found.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from broker_core.client import MessageExt
from broker_core.codec.names import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RESEND_FROM_DLQ
from console import broker_client
from console.selectors.messages import MAX_TIMESTAMP_MS, browse

KEY_QUERY_MAX = 64  # candidates per key query; more than that and the scan decides
SCAN_PAGE = 256


def _since_ms(intent_at: datetime) -> int:
    return max(0, int(intent_at.timestamp() * 1000) - int(float(settings.DLQ_RESEND_CLOCK_SKEW_S) * 1000))


def _is_copy(m: MessageExt, origin_msg_id: str, since_ms: int, known: set[str]) -> bool:
    return (m.properties.get(PROPERTY_ORIGIN_MESSAGE_ID) == origin_msg_id
            and m.properties.get(PROPERTY_RESEND_FROM_DLQ) == "true"
            and m.store_timestamp >= since_ms and m.msg_id not in known)


def _oldest(found: list[MessageExt]) -> MessageExt | None:
    return min(found, key=lambda m: (m.store_timestamp, m.broker_name, m.queue_id, m.queue_offset), default=None)


def find_copy(topic: str, origin_msg_id: str, keys: list[str], intent_at: datetime,
              known: set[str]) -> MessageExt | None:
    """The copy made for an intent of ``intent_at`` (see the module docstring), or None when ``topic`` has none.
    ``known``: unique ids of this dead letter's copies already recorded (other generations). Broker errors
    propagate (an intent that cannot be checked stays an intent)."""
    since = _since_ms(intent_at)
    admin = broker_client.admin()
    for key in keys:
        found, truncated = admin.query_message(topic, key, max_num=KEY_QUERY_MAX, begin_ms=since)
        if not truncated:
            return _oldest([m for m in found if _is_copy(m, origin_msg_id, since, known)])
    matches: list[MessageExt] = []
    cursor = ""
    while True:
        page, nxt = browse(topic, since, MAX_TIMESTAMP_MS, cursor, SCAN_PAGE)
        matches += [m for m in page if _is_copy(m, origin_msg_id, since, known)]
        if nxt is None:
            return _oldest(matches)
        cursor = nxt
