"""Request header shapes that RocketMQ sends in more than one form.

SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) carry ``SendMessageRequestHeaderV2``: the V1 fields under
single-letter keys (reference §3.1). The broker reads both through :func:`send_header`; the SDK writes V2.
"""

from __future__ import annotations

from typing import Any

from broker_core.codec.names import DEFAULT_TOPIC  # noqa: F401
from broker_core.protocol.codes import RequestCode

# V2 letter -> V1 name, in the order of SendMessageRequestHeaderV2.
V2_TO_V1 = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
            "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
            "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname"}
V1_TO_V2 = {v: k for k, v in V2_TO_V1.items()}

DEFAULT_TOPIC_QUEUE_NUMS = 4

# PullSysFlag bits (reference §4.2).
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8
PULL_LITE = 0x10

# END_TRANSACTION commitOrRollback values (MessageSysFlag transaction types).
TRANSACTION_NOT_TYPE = 0
TRANSACTION_COMMIT_TYPE = 8
TRANSACTION_ROLLBACK_TYPE = 12


def send_header(cmd: Any) -> dict[str, str]:
    """The send request's fields under their V1 names, whichever form it came in (310/320: V2 letters;
    10: V1 names). Fields outside the header class (``AccessKey``...) are kept as they are."""
    h: dict[str, str] = cmd.header
    if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE) and "b" in h:
        return {V2_TO_V1.get(k, k): v for k, v in h.items()}
    return h


def to_v2(fields: dict[str, Any]) -> dict[str, Any]:
    """V1-named send fields as a V2 header (unknown names are kept)."""
    return {V1_TO_V2.get(k, k): v for k, v in fields.items()}
