"""A consumer group's live clients as each answers GET_CONSUMER_RUNNING_INFO (307, forwarded by a broker over the
client's own connection): settings, subscriptions, each owned queue's process-queue state (cached messages and
size, locked, last pull and consume times, the offset it would commit), per-topic rates, and where it came from
(client id, address, language, version from the broker's registration).

Asked on demand only (a page load or an API call asks every online client once); a client that does not answer
shows its error instead of failing the page.
"""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode
from broker_core.protocol.client_calls import ConsumerRunningInfo
from console import broker_client
from console.errors import ApiError
from console.selectors.messages import iso_ms

# properties shown first on the page (the rest stay in the full table)
KEY_PROPERTIES = ("consumeFromWhere", "messageModel", "consumeThreadMin", "consumeThreadMax", "pullBatchSize",
                  "consumeMessageBatchMaxSize", "maxReconsumeTimes", "PROP_CONSUMEORDERLY", "PROP_CONSUME_TYPE",
                  "PROP_CLIENT_VERSION", "PROP_THREADPOOL_CORE_SIZE", "PROP_CONSUMER_START_TIMESTAMP")


def client_error(exc: ClientError) -> ApiError:
    """What the console answers when the broker could not reach a client: 409 ``client_not_online``, 504
    ``client_timeout`` (207 CONSUME_MSG_TIMEOUT), else 502 ``client_error`` with the broker's remark."""
    text = str(exc)
    if exc.code == ResponseCode.CONSUME_MSG_TIMEOUT:
        return ApiError(504, "client_timeout", text)
    if "not online" in text:
        return ApiError(409, "client_not_online", text)
    return ApiError(502, "client_error", text)


def running_info_json(info: ConsumerRunningInfo) -> dict[str, Any]:
    """A :class:`ConsumerRunningInfo` for pages and REST: queues as rows with ISO times, rates per topic."""
    queues = []
    for (topic, broker, qid), q in sorted(info.mq_table.items()):
        queues.append({"topic": topic, "broker_name": broker, "queue_id": qid,
                       "cached_count": int(q.get("cachedMsgCount", 0)),
                       "cached_size_mib": int(q.get("cachedMsgSizeInMiB", 0)),
                       "cached_min_offset": int(q.get("cachedMsgMinOffset", 0)),
                       "cached_max_offset": int(q.get("cachedMsgMaxOffset", 0)),
                       "commit_offset": int(q.get("commitOffset", 0)), "locked": bool(q.get("locked", False)),
                       "dropped": bool(q.get("droped", False)),
                       "last_lock": iso_ms(int(q.get("lastLockTimestamp", 0))),
                       "last_pull": iso_ms(int(q.get("lastPullTimestamp", 0))),
                       "last_consume": iso_ms(int(q.get("lastConsumeTimestamp", 0)))})
    rates = [{"topic": t, "pull_rt_ms": float(s.get("pullRT", 0.0)), "pull_tps": float(s.get("pullTPS", 0.0)),
              "consume_rt_ms": float(s.get("consumeRT", 0.0)), "consume_ok_tps": float(s.get("consumeOKTPS", 0.0)),
              "consume_failed_tps": float(s.get("consumeFailedTPS", 0.0)),
              "consume_failed_msgs_hour": int(s.get("consumeFailedMsgs", 0))}
             for t, s in sorted(info.status_table.items())]
    props = dict(sorted(info.properties.items()))
    started = props.get("PROP_CONSUMER_START_TIMESTAMP", "")
    return {"properties": props, "key_properties": [(k, props[k]) for k in KEY_PROPERTIES if k in props],
            "started": iso_ms(int(started)) if started.isdigit() else None,
            "subscriptions": [{"topic": s.get("topic"), "expression": s.get("subString"),
                               "expression_type": s.get("expressionType", "TAG")} for s in info.subscriptions],
            "queues": queues, "rates": rates, "jstack": info.jstack}


def client_running_info(group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
    """One client's running info (ApiError 409/504/502 when the broker cannot get it)."""
    try:
        info = broker_client.admin().client_running_info(group, client_id, jstack)
    except ClientError as exc:
        raise client_error(exc) from exc
    return running_info_json(info)


def group_running_info(group: str) -> list[dict[str, Any]]:
    """Every online client of ``group`` (as the brokers list them: id, address, language, version) with its
    running info, or the ``error`` it answered instead."""
    admin = broker_client.admin()
    rows = []
    for c in admin.consumer_connections(group):
        row: dict[str, Any] = {"client_id": c["clientId"], "client_addr": c.get("clientAddr"),
                               "language": c.get("language"), "version": c.get("version"),
                               "running": None, "error": None}
        try:
            row["running"] = running_info_json(admin.client_running_info(group, c["clientId"]))
        except ClientError as exc:
            row["error"] = str(exc)
        rows.append(row)
    return rows


def direct_targets(consumption: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The clients a message may be consumed directly with: every online client of each group that consumes its
    topic (``consumption`` rows of :func:`console.selectors.tracking.consumption_status`)."""
    admin = broker_client.admin()
    out = []
    for row in consumption:
        if not row.get("online"):
            continue
        for c in admin.consumer_connections(row["group"]):
            out.append({"group": row["group"], "client_id": c["clientId"], "value": f"{row['group']} {c['clientId']}",
                        "label": f"{row['group']} / {c['clientId']} ({c.get('language', '?')})"})
    return out
