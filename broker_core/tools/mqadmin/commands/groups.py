"""updateSubGroup, deleteSubGroup, consumerProgress, consumerConnection, producerConnection, consumerStatus,
resetOffsetByTime, skipAccumulatedMessage (RocketMQ 4.9's layouts)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from broker_core.client import ClientError
from broker_core.codec.fastjson import items
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.protocol.bodies import mq_from_key
from broker_core.tools.mqadmin.cli import CommandFailed, Context, Opt, UsageError, command
from broker_core.tools.mqadmin.commands.common import (
    all_masters,
    call_or_unsupported,
    cluster_masters,
    route_of,
    targets,
)
from broker_core.tools.mqadmin.commands.topics import DLQ, RETRY, delete_topic_in_cluster
from broker_core.tools.mqadmin.fmt import (
    date_s,
    front,
    group_config_string,
    jbool,
    jfmt,
    parse_timestamp,
    version_desc,
)


@command("updateSubGroup", "Update or create subscription group", [
    Opt("b", "brokerAddr", True, "create subscription group to which broker"),
    Opt("c", "clusterName", True, "create subscription group to which cluster"),
    Opt("g", "groupName", True, "consumer group name", required=True),
    Opt("s", "consumeEnable", True, "consume enable"),
    Opt("m", "consumeFromMinEnable", True, "from min offset"),
    Opt("d", "consumeBroadcastEnable", True, "broadcast"),
    Opt("q", "retryQueueNums", True, "retry queue nums"),
    Opt("r", "retryMaxTimes", True, "retry max times"),
    Opt("i", "brokerId", True, "consumer from which broker id"),
    Opt("w", "whichBrokerWhenConsumeSlowly", True, "which broker id when consume slowly"),
    Opt("a", "notifyConsumerIdsChanged", True, "notify consumerId changed"),
], group=("b", "c"))
def update_sub_group(ctx: Context) -> None:
    cfg: dict[str, Any] = {
        "groupName": ctx.req("g"), "consumeEnable": ctx.truth("s", True),
        "consumeFromMinEnable": ctx.truth("m", False), "consumeBroadcastEnable": ctx.truth("d", False),
        "retryQueueNums": ctx.num("q", 1), "retryMaxTimes": ctx.num("r", 16), "brokerId": ctx.num("i", 0),
        "whichBrokerWhenConsumeSlowly": ctx.num("w", 1),
        "notifyConsumerIdsChangedEnable": ctx.truth("a", True)}
    for addr in targets(ctx):
        ctx.admin.update_subscription_group(addr, cfg)
        ctx.print("create subscription group to %s success.%n", addr)
    ctx.print("%s", group_config_string(cfg))


@command("deleteSubGroup", "Delete subscription group from broker.", [
    Opt("b", "brokerAddr", True, "delete subscription group from which broker"),
    Opt("c", "clusterName", True, "delete subscription group from which cluster"),
    Opt("g", "groupName", True, "subscription group name", required=True),
    Opt("r", "removeOffset", True, "remove offset"),
], group=("b", "c"))
def delete_sub_group(ctx: Context) -> None:
    group, remove = ctx.req("g"), ctx.truth("r", False)
    if ctx.has("b"):
        addr = ctx.req("b")
        ctx.admin.delete_subscription_group(addr, group, remove)
        ctx.print("delete subscription group [%s] from broker [%s] success.%n", group, addr)
        return
    cluster = ctx.req("c")
    for addr in cluster_masters(ctx, cluster).values():
        ctx.admin.delete_subscription_group(addr, group, remove)
        ctx.print("delete subscription group [%s] from broker [%s] in cluster [%s] success.%n", group, addr, cluster)
    for topic in (RETRY + group, DLQ + group):
        delete_topic_in_cluster(ctx, cluster, topic)


def _connection(ctx: Context, group: str) -> dict[str, Any] | None:
    """The group's ConsumerConnection from the first master of its ``%RETRY%`` route (or any master)."""
    try:
        route = ctx.admin.topic_route(RETRY + group)
        addrs = [b["brokerAddrs"]["0"] for b in route["brokerDatas"] if "0" in b["brokerAddrs"]]
    except ClientError:
        addrs = []
    if not addrs:
        addrs = all_masters(ctx)
    for addr in addrs:
        cc = ctx.admin.consumer_connection(addr, group)
        if cc:
            return cc
    return None


@command("consumerProgress", "Query consumers's progress, speed", [
    Opt("g", "groupName", True, "consumer group name"),
    Opt("s", "showClientIP", True, "Show Client IP per Queue"),
])
def consumer_progress(ctx: Context) -> None:
    show_ip = ctx.truth("s", False)
    if ctx.has("g"):
        group = ctx.req("g")
        progress = ctx.admin.consume_stats(group)
        rows = sorted(progress["offsetTable"], key=lambda r: (r["topic"], r["brokerName"], r["queueId"]))
        owners = _allocation(ctx, group) if show_ip else {}
        if show_ip:
            ctx.print("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s%n", "#Topic", "#Broker Name", "#QID",
                      "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#LastTime")
        else:
            ctx.print("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n", "#Topic", "#Broker Name", "#QID",
                      "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime")
        total = 0
        for r in rows:
            consumer = max(r["consumerOffset"], 0)
            diff = r["maxOffset"] - consumer
            total += diff
            last = "N/A" if r["lastTimestamp"] == 0 else date_s(r["lastTimestamp"])
            if show_ip:  # the allocation comes from each client's running info (307); N/A where unknown
                owner = owners.get((r["topic"], r["brokerName"], r["queueId"]), "N/A")
                ctx.print("%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d  %s%n", front(r["topic"], 64),
                          front(r["brokerName"], 32), r["queueId"], r["maxOffset"], consumer, owner, diff, last)
            else:
                ctx.print("%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s%n", front(r["topic"], 64),
                          front(r["brokerName"], 32), r["queueId"], r["maxOffset"], consumer, diff, last)
        ctx.print("%n")
        ctx.print("Consume TPS: %.2f%n", progress["consumeTps"])
        ctx.print("Diff Total: %d%n", total)
        return
    ctx.print("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s%n", "#Group", "#Count", "#Version", "#Type", "#Model",
              "#TPS", "#Diff Total")
    for topic in ctx.admin.topic_list():
        if not topic.startswith(RETRY):
            continue
        group = topic[len(RETRY):]
        try:
            stats: dict[str, Any] | None = ctx.admin.consume_stats(group)
        except ClientError:
            stats = None
        cc = _connection(ctx, group)
        conns = (cc or {}).get("connectionSet") or []
        count = len(conns)
        ctype = (cc or {}).get("consumeType", "")
        version = version_desc(min(int(c.get("version", 0)) for c in conns)) if count else "OFFLINE"
        type_desc = ("PULL" if ctype == "CONSUME_ACTIVELY" else "PUSH") if count else ""
        model = str((cc or {}).get("messageModel", "")) if count and ctype == "CONSUME_PASSIVELY" else ""
        tps = int(stats["consumeTps"]) if stats else 0
        diff = sum(r["maxOffset"] - max(r["consumerOffset"], 0) for r in stats["offsetTable"]) if stats else 0
        ctx.print("%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d%n", front(group, 64), count, version, type_desc, model,
                  tps, diff)


@command("consumerConnection", "Query consumer's socket connection, client version and subscription", [
    Opt("g", "consumerGroup", True, "consumer group name", required=True),
    Opt("b", "brokerAddr", True, "broker address"),
])
def consumer_connection(ctx: Context) -> None:
    group = ctx.req("g")
    cc = ctx.admin.consumer_connection(ctx.req("b"), group) if ctx.has("b") else _connection(ctx, group)
    if not cc:
        raise CommandFailed(f"CODE: {int(ResponseCode.CONSUMER_NOT_ONLINE)}  DESC: the consumer group[{group}] "
                            "not online")
    ctx.print("%-36s %-22s %-10s %s%n", "#ClientId", "#ClientAddr", "#Language", "#Version")
    for c in sorted(cc.get("connectionSet") or [], key=lambda c: c["clientId"]):
        ctx.print("%-36s %-22s %-10s %s%n", c["clientId"], c["clientAddr"], c["language"], version_desc(c["version"]))
    ctx.print("%nBelow is subscription:\n")
    ctx.print("%-20s %s%n", "#Topic", "#SubExpression")
    for topic, sub in sorted(dict(cc.get("subscriptionTable") or {}).items()):
        ctx.print("%-20s %s%n", topic, sub.get("subString", "*"))
    ctx.print("\n")
    ctx.print("ConsumeType: %s%n", cc.get("consumeType"))
    ctx.print("MessageModel: %s%n", cc.get("messageModel"))
    ctx.print("ConsumeFromWhere: %s%n", cc.get("consumeFromWhere"))


@command("producerConnection", "Query producer's socket connection and client version", [
    Opt("g", "producerGroup", True, "producer group name", required=True),
    Opt("t", "topic", True, "topic name", required=True),
])
def producer_connection(ctx: Context) -> None:
    group, route = ctx.req("g"), route_of(ctx, ctx.req("t"))
    conns: dict[str, dict[str, Any]] = {}
    for b in route["brokerDatas"]:
        addr = b["brokerAddrs"].get("0")
        if addr is None:
            continue
        try:
            for c in ctx.admin.producer_connection(addr, group).get("connectionSet") or []:
                conns.setdefault(c["clientId"], c)
        except ClientError as exc:
            if exc.code != ResponseCode.SYSTEM_ERROR:  # SYSTEM_ERROR: no producer of the group on that broker
                raise
    if not conns:
        raise CommandFailed(f"CODE: {int(ResponseCode.SYSTEM_ERROR)}  DESC: the producer group[{group}] not exist")
    for i, c in enumerate((conns[k] for k in sorted(conns)), start=1):
        ctx.print("%04d  %-32s %-22s %-8s %s%n", i, c["clientId"], c["clientAddr"], c["language"],
                  version_desc(c["version"]))


@command("consumerStatus", "Query consumer's internal data structure", [
    Opt("g", "consumerGroup", True, "consumer group name", required=True),
    Opt("i", "clientId", True, "The consumer's client id"),
    Opt("b", "brokerAddr", True, "broker address"),
    Opt("s", "jstack", False, "Run jstack command in the consumer progress"),
])
def consumer_status(ctx: Context) -> None:
    group = ctx.req("g")
    cc = ctx.admin.consumer_connection(ctx.req("b"), group) if ctx.has("b") else _connection(ctx, group)
    if not cc:
        raise CommandFailed(f"the consumer group[{group}] not online")
    addr = ctx.get("b") or _broker_of_group(ctx, group)
    clients = sorted(cc.get("connectionSet") or [], key=lambda c: c["clientId"])
    if ctx.has("i"):
        info = call_or_unsupported(ctx, "GET_CONSUMER_RUNNING_INFO", addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                   ctx.admin.consumer_running_info, addr, group, ctx.req("i"), ctx.has("s"))
        ctx.print("%s", _running_info_text(info))
        return
    ctx.print("%-10s %-40s %-20s %s%n", "#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")
    folder = Path(str(int(time.time() * 1000)))
    infos = []
    for i, c in enumerate(clients, start=1):
        info = call_or_unsupported(ctx, "GET_CONSUMER_RUNNING_INFO", addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                   ctx.admin.consumer_running_info, addr, group, c["clientId"], ctx.has("s"))
        infos.append(info)
        folder.mkdir(exist_ok=True)
        path = folder / c["clientId"].replace("/", "_")
        path.write_text(_running_info_text(info))
        ctx.print("%-10d %-40s %-20s %s%n", i, c["clientId"], version_desc(c["version"]), path)
    if not infos:
        return
    subs = [sorted(json.dumps(s, sort_keys=True) for s in info.get("subscriptionSet") or []) for info in infos]
    if all(s == subs[0] for s in subs):
        queues = [str(q) for info in infos for q in dict(info.get("mqTable") or {})]
        ctx.print("%n%nSame subscription in the same group of consumer")
        ctx.print("%n%nRebalance %s%n", "OK" if len(queues) == len(set(queues)) else "Failed")
    else:
        ctx.print("%n%nWARN: Different subscription in the same group of consumer!!!")


def _allocation(ctx: Context, group: str) -> dict[tuple[str, str, int], str]:
    """Which client IP holds each queue, from every online member's running info (307), as RocketMQ's
    ``getMessageQueueAllocationResult``; members that do not answer are left out."""
    cc = _connection(ctx, group)
    if not cc:
        return {}
    addr = _broker_of_group(ctx, group)
    owners = {}
    for c in cc.get("connectionSet") or []:
        try:
            info = ctx.admin.consumer_running_info(addr, group, c["clientId"])
        except ClientError:
            continue
        for key, _pq in items(info.get("mqTable") or {}):
            owners[mq_from_key(key)] = str(c["clientId"]).split("@")[0]
    return owners


def _broker_of_group(ctx: Context, group: str) -> str:
    route = route_of(ctx, RETRY + group)
    for b in route["brokerDatas"]:
        if "0" in b["brokerAddrs"]:
            return str(b["brokerAddrs"]["0"])
    raise CommandFailed(f"no master serves {RETRY}{group}")


def _running_info_text(info: dict[str, Any]) -> str:
    """The sections of ``ConsumerRunningInfo.formatString`` (properties, subscriptions, offsets, RT/TPS)."""
    out = "#Consumer Properties#\n"
    for i, (k, v) in enumerate(sorted(dict(info.get("properties") or {}).items()), start=1):
        out += jfmt("%-40s: %s%n", f"{i:03d} {k}", v)
    out += "\n\n#Consumer Subscription#\n"
    for i, sub in enumerate(info.get("subscriptionSet") or [], start=1):
        out += jfmt(
            "%03d Topic: %-40s ClassFilter: %-8s SubExpression: %s%n", i, sub.get("topic"),
            jbool(sub.get("classFilterMode")), sub.get("subString"))
    out += "\n\n#Consumer Offset#\n"
    out += jfmt("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID", "#Consumer Offset")
    for key, pq in sorted(dict(info.get("mqTable") or {}).items(), key=lambda kv: str(kv[0])):
        out += jfmt("%-64s  %-32s  %-4s  %-20s%n", str(key), "", "", pq.get("commitOffset"))
    out += "\n\n#Consumer RT&TPS#\n"
    for topic, st in sorted(dict(info.get("statusTable") or {}).items()):
        out += jfmt(
            "%-64s  %14s %14s %14s %14s %18s %25s%n", topic, st.get("pullRT"), st.get("pullTPS"), st.get("consumeRT"),
            st.get("consumeOKTPS"),
            st.get("consumeFailedTPS"), st.get("consumeFailedMsgs"))
    return out


def _reset(ctx: Context, group: str, topic: str, timestamp: int, force: bool) -> dict[tuple[str, int], int]:
    try:
        return ctx.admin.reset_offset(group, topic, timestamp_ms=timestamp, force=force)
    except ClientError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            raise CommandFailed(f"topic[{topic}] not exist") from None
        raise


def _print_offsets(ctx: Context, table: dict[tuple[str, int], int]) -> None:
    ctx.print("%-40s  %-40s  %-40s%n", "#brokerName", "#queueId", "#offset")
    for (broker, queue), offset in sorted(table.items()):
        ctx.print("%-40s  %-40d  %-40d%n", front(broker, 32), queue, offset)


@command("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).", [
    Opt("g", "group", True, "set the consumer group", required=True),
    Opt("t", "topic", True, "set the topic", required=True),
    Opt("s", "timestamp", True, "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]", required=True),
    Opt("f", "force", True, "set the force rollback by timestamp switch[true|false]"),
    Opt("c", "cplus", False, "reset c++ client offset"),
])
def reset_offset_by_time(ctx: Context) -> None:
    group, topic, text = ctx.req("g"), ctx.req("t"), ctx.req("s")
    try:
        timestamp = -1 if text == "now" else parse_timestamp(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    force = ctx.truth("f", True)
    table = _reset(ctx, group, topic, timestamp, force)
    ctx.print("rollback consumer offset by specified group[%s], topic[%s], force[%s], timestamp(string)[%s], "
              "timestamp(long)[%s]%n", group, topic, jbool(force), text, timestamp)
    _print_offsets(ctx, table)


@command("skipAccumulatedMessage", "Skip all messages that are accumulated (not consumed) currently", [
    Opt("g", "group", True, "set the consumer group", required=True),
    Opt("t", "topic", True, "set the topic", required=True),
    Opt("f", "force", True, "set the force rollback by timestamp switch[true|false]"),
])
def skip_accumulated(ctx: Context) -> None:
    _print_offsets(ctx, _reset(ctx, ctx.req("g"), ctx.req("t"), -1, ctx.truth("f", True)))
