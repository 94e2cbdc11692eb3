"""updateTopic, deleteTopic, topicList, topicRoute, topicStatus, topicClusterList (RocketMQ 4.9's layouts)."""

from __future__ import annotations

from typing import Any

from broker_core.codec.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from broker_core.protocol import RequestCode
from broker_core.tools.mqadmin.cli import Context, Opt, UsageError, command
from broker_core.tools.mqadmin.commands.common import broker_name_of, cluster_masters, namesrv_call, route_of
from broker_core.tools.mqadmin.fmt import fastjson_pretty, front, human_ms, jbool, topic_config_string

RETRY, DLQ = RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX


@command("updateTopic", "Update or create topic", [
    Opt("b", "brokerAddr", True, "create topic to which broker"),
    Opt("c", "clusterName", True, "create topic to which cluster"),
    Opt("t", "topic", True, "topic name", required=True),
    Opt("r", "readQueueNums", True, "set read queue nums"),
    Opt("w", "writeQueueNums", True, "set write queue nums"),
    Opt("p", "perm", True, "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"),
    Opt("o", "order", True, "set topic's order(true|false)"),
    Opt("u", "unit", True, "is unit topic (true|false)"),
    Opt("s", "hasUnitSub", True, "has unit sub (true|false)"),
], group=("b", "c"))
def update_topic(ctx: Context) -> None:
    order = ctx.truth("o", False)
    sys_flag = (1 if ctx.truth("u", False) else 0) | (2 if ctx.truth("s", False) else 0)
    cfg: dict[str, Any] = {"topic": ctx.req("t"), "defaultTopic": "TBW102", "readQueueNums": ctx.num("r", 8),
                           "writeQueueNums": ctx.num("w", 8), "perm": ctx.num("p", 6),
                           "topicFilterType": "SINGLE_TAG", "topicSysFlag": sys_flag, "order": order}
    admin = ctx.admin
    if ctx.has("b"):
        addr = ctx.req("b")
        admin.request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, cfg)
        if order:
            name = broker_name_of(ctx, addr)
            conf = f"{name}:{cfg['writeQueueNums']}"
            namesrv_call(ctx, RequestCode.PUT_KV_CONFIG,
                         {"namespace": "ORDER_TOPIC_CONFIG", "key": cfg["topic"], "value": conf})
            ctx.print("%s%n", f"set broker orderConf. isOrder={jbool(order)}, orderConf=[{conf}]")
        ctx.print("create topic to %s success.%n", addr)
        ctx.print("%s%n", topic_config_string(cfg))
        return
    cluster = ctx.req("c")
    masters = cluster_masters(ctx, cluster)
    if not masters:
        raise UsageError(f"no master of cluster {cluster} is registered")
    for addr in masters.values():
        admin.request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, cfg)
        ctx.print("create topic to %s success.%n", addr)
    if order:
        conf = ";".join(f"{name}:{cfg['writeQueueNums']}" for name in masters)
        namesrv_call(ctx, RequestCode.PUT_KV_CONFIG,
                     {"namespace": "ORDER_TOPIC_CONFIG", "key": cfg["topic"], "value": conf})
        ctx.print("set cluster orderConf. isOrder=%s, orderConf=[%s]%n", jbool(order), conf)
    ctx.print("%s%n", topic_config_string(cfg))


def delete_topic_in_cluster(ctx: Context, cluster: str, topic: str) -> None:
    for addr in cluster_masters(ctx, cluster).values():
        ctx.admin.request(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
    ctx.print("delete topic [%s] from cluster [%s] success.%n", topic, cluster)
    for ns in ctx.admin.namesrv_addrs:
        ctx.admin.request(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
    ctx.print("delete topic [%s] from NameServer success.%n", topic)


@command("deleteTopic", "Delete topic from broker and NameServer.", [
    Opt("t", "topic", True, "topic name", required=True),
    Opt("c", "clusterName", True, "delete topic from which cluster", required=True),
])
def delete_topic(ctx: Context) -> None:
    delete_topic_in_cluster(ctx, ctx.req("c"), ctx.req("t"))


@command("topicList", "Fetch all topic list from name server", [Opt("c", "clusterModel", False, "clusterModel")])
def topic_list(ctx: Context) -> None:
    topics = ctx.admin.topic_list()
    if not ctx.has("c"):
        for t in topics:
            ctx.print("%s%n", t)
        return
    info = ctx.admin.cluster_info()
    ctx.print("%-20s  %-48s  %-48s%n", "#Cluster Name", "#Topic", "#Consumer Group")
    for t in topics:
        if t.startswith(RETRY) or t.startswith(DLQ):
            continue
        cluster, groups = "", [""]
        try:
            route = route_of(ctx, t)
            first = route["brokerDatas"][0]["brokerName"] if route["brokerDatas"] else ""
            cluster = next((c for c, names in info.get("clusterAddrTable", {}).items() if first in names), "")
            addr = route["brokerDatas"][0]["brokerAddrs"].get("0") if route["brokerDatas"] else None
            groups = (ctx.admin.topic_consumed_by(addr, t) if addr else []) or [""]
        except (OSError, ValueError, RuntimeError):
            pass  # as RocketMQ: a topic whose route or groups cannot be read prints with blanks
        for g in groups:
            ctx.print("%-20s  %-64s  %-64s%n", front(cluster, 20), front(t, 64), front(g, 64))


@command("topicRoute", "Examine topic route info", [
    Opt("t", "topic", True, "topic name", required=True),
    Opt("l", "list", False, "Use list format to print data"),
])
def topic_route(ctx: Context) -> None:
    route = route_of(ctx, ctx.req("t"))
    if not ctx.has("l"):
        pretty: dict[str, Any] = {
            "brokerDatas": [{"brokerAddrs": {int(k): v for k, v in sorted(b["brokerAddrs"].items(),
                                                                          key=lambda kv: int(kv[0]))},
                             "brokerName": b["brokerName"], "cluster": b.get("cluster", "")}
                            for b in route["brokerDatas"]],
            "filterServerTable": route.get("filterServerTable") or {},
            "queueDatas": [{k: q[k] for k in sorted(q)} for q in route["queueDatas"]],
        }
        ctx.print("%s%n", fastjson_pretty(pretty))
        return
    fmt = "%-45s %-32s %-50s %-10s %-11s %-5s%n"
    queues = {q["brokerName"]: q for q in route["queueDatas"]}
    ctx.print(fmt, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    total_r = total_w = 0
    for b in sorted(route["brokerDatas"], key=lambda b: b["brokerName"]):
        q = queues[b["brokerName"]]
        total_r += q["readQueueNums"]
        total_w += q["writeQueueNums"]
        pairs = sorted(b["brokerAddrs"].items(), key=lambda kv: int(kv[0]))
        addrs = "{" + ", ".join(f"{k}={v}" for k, v in pairs) + "}"
        ctx.print(fmt, b.get("cluster", ""), b["brokerName"], addrs, q["readQueueNums"], q["writeQueueNums"],
                  q["perm"])
    ctx.print("%s%n", "-" * 158)
    ctx.print(fmt, "Total:", len(queues), "", total_r, total_w, "")


@command("topicStatus", "Examine topic Status info", [Opt("t", "topic", True, "topic name", required=True)])
def topic_status(ctx: Context) -> None:
    rows = sorted(ctx.admin.topic_stats(ctx.req("t")), key=lambda r: (r["topic"], r["brokerName"], r["queueId"]))
    ctx.print("%-32s  %-4s  %-20s  %-20s    %s%n", "#Broker Name", "#QID", "#Min Offset", "#Max Offset",
              "#Last Updated")
    for r in rows:
        last = human_ms(r["lastUpdateTimestamp"]) if r["lastUpdateTimestamp"] > 0 else ""
        ctx.print("%-32s  %-4d  %-20d  %-20d    %s%n", front(r["brokerName"], 32), r["queueId"], r["minOffset"],
                  r["maxOffset"], last)


@command("topicClusterList", "get cluster info for topic", [Opt("t", "topic", True, "topic name", required=True)])
def topic_cluster_list(ctx: Context) -> None:
    route = route_of(ctx, ctx.req("t"))
    names = {b["brokerName"] for b in route["brokerDatas"]}
    for cluster, members in sorted(ctx.admin.cluster_info().get("clusterAddrTable", {}).items()):
        if names & set(members):
            ctx.print("%s%n", cluster)
