"""How RocketMQ's tools print things: Java booleans, ``UtilAll`` dates, ``frontStringAtLeast``, ``MQVersion`` names,
``toString`` forms of TopicConfig, SubscriptionGroupConfig and MessageExt, and fastjson's pretty JSON."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from broker_core.client import MessageExt


def jfmt(fmt: str, *args: Any) -> str:
    """Java ``String.format`` for the conversions the tools use (``%-20s``, ``%d``, ``%.2f``, ``%n``)."""
    return fmt.replace("%n", "\n") % args


def jbool(value: object) -> str:
    return "true" if value else "false"


def front(text: object, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``size`` characters."""
    s = "" if text is None else str(text)
    return s[:size]


def human_ms(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` in local time."""
    t = dt.datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


def date_s(ms: int) -> str:
    """``UtilAll.formatDate(.., YYYY_MM_DD_HH_MM_SS)``."""
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time) as RocketMQ's tools take it."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        t = dt.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise ValueError(f"not epoch milliseconds nor yyyy-MM-dd#HH:mm:ss:SSS: {text!r}") from None
    return int(t.timestamp() * 1000)


def version_desc(version: object) -> str:
    """``MQVersion.getVersionDesc``: the ``Version`` enum name of an ordinal (4.0.0 to 5.9.9, where each release
    has a SNAPSHOT and a final ordinal in turn from V4_0_0_SNAPSHOT = 212)."""
    try:
        v = int(str(version))
    except ValueError:
        return str(version)
    if not 212 <= v <= 611:
        return str(v)
    k, final = divmod(v - 212, 2)
    name = f"V{4 + k // 100}_{(k % 100) // 10}_{k % 10}"
    return name if final else name + "_SNAPSHOT"


def perm_string(perm: int) -> str:
    """``PermName.perm2String``."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def topic_config_string(cfg: dict[str, Any]) -> str:
    return (f"TopicConfig [topicName={cfg['topic']}, readQueueNums={cfg['readQueueNums']}, "
            f"writeQueueNums={cfg['writeQueueNums']}, perm={perm_string(int(cfg['perm']))}, "
            f"topicFilterType={cfg['topicFilterType']}, topicSysFlag={cfg['topicSysFlag']}, "
            f"order={jbool(cfg['order'])}]")


def group_config_string(cfg: dict[str, Any]) -> str:
    return (f"SubscriptionGroupConfig [groupName={cfg['groupName']}, consumeEnable={jbool(cfg['consumeEnable'])}, "
            f"consumeFromMinEnable={jbool(cfg['consumeFromMinEnable'])}, "
            f"consumeBroadcastEnable={jbool(cfg['consumeBroadcastEnable'])}, "
            f"retryQueueNums={cfg['retryQueueNums']}, retryMaxTimes={cfg['retryMaxTimes']}, "
            f"brokerId={cfg['brokerId']}, whichBrokerWhenConsumeSlowly={cfg['whichBrokerWhenConsumeSlowly']}, "
            f"notifyConsumerIdsChangedEnable={jbool(cfg['notifyConsumerIdsChangedEnable'])}]")


def java_map(d: dict[str, str]) -> str:
    """A Java ``HashMap.toString`` of strings (``{a=1, b=2}``; keys sorted here for a stable output)."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(d.items())) + "}"


def message_ext_string(m: MessageExt) -> str:
    """``MessageExt.toString`` (the body as Java's ``Arrays.toString`` of signed bytes)."""
    body = "[" + ", ".join(str(b - 256 if b > 127 else b) for b in m.body) + "]"
    return (f"MessageExt [brokerName={m.broker_name}, queueId={m.queue_id}, storeSize={_store_size(m)}, "
            f"queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, "
            f"bornHost=/{m.born_host}, storeTimestamp={m.store_timestamp}, storeHost=/{m.store_host}, "
            f"msgId={m.offset_msg_id}, commitLogOffset={m.commit_log_offset}, bodyCRC={getattr(m, 'body_crc', 0)}, "
            f"reconsumeTimes={m.reconsume_times}, preparedTransactionOffset=0, toString()=Message{{topic='{m.topic}', "
            f"flag={getattr(m, 'flag', 0)}, properties={java_map(m.properties)}, body={body}, "
            f"transactionId='null'}}]")


def _store_size(m: MessageExt) -> int:
    return int(getattr(m, "store_size", 0) or 0)


def fastjson_pretty(value: Any, indent: int = 0) -> str:
    """fastjson ``toJSONString(obj, true)``: tab indents, ``"key":value`` without spaces, integer map keys bare."""
    tab = "\t" * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = []
        for k, v in value.items():
            key = str(k) if isinstance(k, int) else json.dumps(str(k), ensure_ascii=False)
            items.append(f"{tab}{key}:{fastjson_pretty(v, indent + 1)}")
        return "{\n" + ",\n".join(items) + "\n" + "\t" * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(tab + fastjson_pretty(v, indent + 1) for v in value) + "\n" + "\t" * indent + "]"
    if isinstance(value, bool):
        return jbool(value)
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False)
