"""The broker's SQL92 filter of a pull (RocketMQ's ``ExpressionMessageFilter.isMatchedByCommitLog``).

The store picks a queue's records by tag hash only; for a SQL92 subscription the broker then decodes each picked
record's properties and keeps the records the selector matches, so non-matching messages never cross the wire.
The pull's ``nextBeginOffset`` still moves past every record looked at, matched or not (as RocketMQ's store
does), so a consumer never sees a filtered record again and never stalls on a run of them.
"""

from __future__ import annotations

from broker_core.codec.message import decode_properties
from broker_core.codec.records import walk_records
from broker_core.protocol.filter import Subscription


def matching_records(chunks: list[bytes], queue_offsets: list[int], sub: Subscription) -> list[tuple[int, bytes]]:
    """``(queue offset, record)`` of each record of ``chunks`` that ``sub`` selects (``queue_offsets`` has one entry
    per record, in order, as the store's result gives them)."""
    out: list[tuple[int, bytes]] = []
    i = 0
    for chunk in chunks:
        pos = 0
        for fields, _body, _topic, raw_props in walk_records(chunk, "pulled records"):
            size = fields[0]
            if sub.matches_message(decode_properties(raw_props) if raw_props else {}):
                out.append((queue_offsets[i], chunk[pos:pos + size]))
            pos += size
            i += 1
    return out


def filter_records(chunks: list[bytes], sub: Subscription) -> tuple[bytes, int]:
    """The records of ``chunks`` (runs of whole stored records) that ``sub`` selects, concatenated as stored,
    and how many there are."""
    kept: list[bytes] = []
    for chunk in chunks:
        pos = 0
        for fields, _body, _topic, raw_props in walk_records(chunk, "pulled records"):
            size = fields[0]
            if sub.matches_message(decode_properties(raw_props) if raw_props else {}):
                kept.append(chunk[pos:pos + size])
            pos += size
    return b"".join(kept), len(kept)
