"""clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig, wipeWritePerm, addWritePerm, cleanExpiredCQ,
deleteExpiredCommitLog, statsAll (RocketMQ 4.9's layouts)."""

from __future__ import annotations

import json
import time
from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.tools.mqadmin.cli import Context, Opt, command
from broker_core.tools.mqadmin.commands.common import (
    all_masters,
    call_or_unsupported,
    cluster_addrs,
    cluster_masters,
    route_of,
    targets,
)
from broker_core.tools.mqadmin.commands.topics import DLQ, RETRY
from broker_core.tools.mqadmin.fmt import front, jfmt


def runtime_table(ctx: Context, addr: str) -> dict[str, str]:
    """28 GET_BROKER_RUNTIME_INFO's ``KVTable`` as the text it carries."""
    body = ctx.admin.request(addr, RequestCode.GET_BROKER_RUNTIME_INFO).body
    return {str(k): str(v) for k, v in json.loads(body).get("table", {}).items()}


def _brokers(ctx: Context) -> list[tuple[str, str, str, str]]:
    """(cluster, broker name, id, address) in RocketMQ's order: clusters, names sorted, ids."""
    info = ctx.admin.cluster_info()
    out = []
    for cluster, names in sorted(info.get("clusterAddrTable", {}).items()):
        for name in sorted(names):
            addrs = info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {})
            out += [(cluster, name, bid, addr) for bid, addr in sorted(addrs.items(), key=lambda kv: int(kv[0]))]
    return out


def _long(table: dict[str, str], key: str) -> int:
    return int(table[key])


@command("clusterList", "List all of clusters", [
    Opt("m", "moreStats", False, "Print more stats"),
    Opt("i", "interval", True, "specify intervals numbers, it is in seconds"),
])
def cluster_list(ctx: Context) -> None:
    interval = ctx.num("i", 0)
    while True:
        _more_stats(ctx) if ctx.has("m") else _base_stats(ctx)
        if interval <= 0:
            return
        time.sleep(interval)


def _base_stats(ctx: Context) -> None:
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s%n"
    ctx.print(fmt, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
              "#PCWait(ms)", "#Hour", "#SPACE")
    for cluster, name, bid, addr in _brokers(ctx):
        t: dict[str, str] = {}
        try:
            t = runtime_table(ctx, addr)  # a key the broker does not report prints as Java's null
        except (ClientError, OSError) as exc:
            ctx.warn(f"{addr}: {exc!r}")
        tps_in = float(t.get("putTps", "0").split(" ")[0] or 0)
        tps_out = float(t.get("getTransferedTps", "0").split(" ")[0] or 0)
        hour = (time.time() * 1000 - int(t["earliestMessageTimeStamp"])) / 3_600_000 \
            if t.get("earliestMessageTimeStamp") else 0.0
        space = float(t["commitLogDiskRatio"]) if t.get("commitLogDiskRatio") else 0.0
        ctx.print(fmt, cluster, name, bid, addr, t.get("brokerVersionDesc", "null"),
                  jfmt("%9.2f(%s,%sms)", tps_in, t.get("sendThreadPoolQueueSize", "null"),
                       t.get("sendThreadPoolQueueHeadWaitTimeMills", "null")),
                  jfmt("%9.2f(%s,%sms)", tps_out, t.get("pullThreadPoolQueueSize", "null"),
                       t.get("pullThreadPoolQueueHeadWaitTimeMills", "null")),
                  t.get("pageCacheLockTimeMills", "null"), jfmt("%2.2f", hour), jfmt("%.4f", space))


def _more_stats(ctx: Context) -> None:
    ctx.print("%-16s  %-32s %14s %14s %14s %14s%n", "#Cluster Name", "#Broker Name", "#InTotalYest",
              "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
    for cluster, name, _bid, addr in _brokers(ctx):
        totals = [0, 0, 0, 0]
        try:
            t = runtime_table(ctx, addr)
            totals = [_long(t, "msgPutTotalTodayMorning") - _long(t, "msgPutTotalYesterdayMorning"),
                      _long(t, "msgGetTotalTodayMorning") - _long(t, "msgGetTotalYesterdayMorning"),
                      _long(t, "msgPutTotalTodayNow") - _long(t, "msgPutTotalTodayMorning"),
                      _long(t, "msgGetTotalTodayNow") - _long(t, "msgGetTotalTodayMorning")]
        except (ClientError, OSError, KeyError, ValueError) as exc:
            ctx.warn(f"{addr}: {exc!r}")
        ctx.print("%-16s  %-32s %14d %14d %14d %14d%n", cluster, name, *totals)


@command("brokerStatus", "Fetch broker runtime status data", [
    Opt("b", "brokerAddr", True, "Broker address"),
    Opt("c", "clusterName", True, "which cluster"),
], group=("b", "c"))
def broker_status(ctx: Context) -> None:
    if ctx.has("b"):
        for k, v in sorted(runtime_table(ctx, ctx.req("b")).items()):
            ctx.print("%-32s: %s%n", k, v)
        return
    for addr in cluster_addrs(ctx, ctx.req("c")):
        for k, v in sorted(runtime_table(ctx, addr).items()):
            ctx.print("%-24s %-32s: %s%n", addr, k, v)


def _print_config(ctx: Context, prefix: str, addr: str) -> None:
    cfg = ctx.admin.broker_config(addr)
    ctx.print("%s", prefix)
    if not cfg:
        ctx.print("Broker[%s] has no config property!\n", addr)
        return
    for k, v in sorted(cfg.items()):
        ctx.print("%-50s=  %s\n", k, v)
    ctx.print("%n")


@command("getBrokerConfig", "Get broker config by cluster or special broker!", [
    Opt("b", "brokerAddr", True, "get which broker"),
    Opt("c", "clusterName", True, "get which cluster"),
], group=("b", "c"))
def get_broker_config(ctx: Context) -> None:
    if ctx.has("b"):
        addr = ctx.req("b")
        _print_config(ctx, f"============{addr}============\n", addr)
        return
    info = ctx.admin.cluster_info()
    names = info.get("clusterAddrTable", {}).get(ctx.req("c"), [])
    for name in sorted(names):
        addrs = info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {})
        master = addrs.get("0")
        if master is None:
            continue
        _print_config(ctx, f"============Master: {master}============\n", master)
        for bid, slave in sorted(addrs.items(), key=lambda kv: int(kv[0])):
            if bid != "0":
                _print_config(ctx, f"============My Master: {master}=====Slave: {slave}============\n", slave)


@command("updateBrokerConfig", "Update broker's config", [
    Opt("b", "brokerAddr", True, "update which broker"),
    Opt("c", "clusterName", True, "update which cluster"),
    Opt("k", "key", True, "config key", required=True),
    Opt("v", "value", True, "config value", required=True),
], group=("b", "c"))
def update_broker_config(ctx: Context) -> None:
    for addr in targets(ctx, with_slaves=False):
        ctx.admin.update_broker_config(addr, {ctx.req("k"): ctx.req("v")})
        ctx.print("update broker config success, %s\n", addr)


def _perm(ctx: Context, verb: str, results: dict[str, Any], broker: str) -> None:
    for ns, result in results.items():
        if isinstance(result, ClientError):
            ctx.print("%s write perm of broker[%s] in name server[%s] Failed%n", verb, broker, ns)
            ctx.warn(f"{ns}: {result}")
        else:
            ctx.print("%s write perm of broker[%s] in name server[%s] OK, %d%n", verb, broker, ns, result)


@command("wipeWritePerm", "Wipe write perm of broker in all name server", [
    Opt("b", "brokerName", True, "broker name", required=True),
])
def wipe_write_perm(ctx: Context) -> None:
    _perm(ctx, "wipe", ctx.admin.wipe_write_perm(ctx.req("b")), ctx.req("b"))


@command("addWritePerm", "Add write perm of broker in all name server", [
    Opt("b", "brokerName", True, "broker name", required=True),
])
def add_write_perm(ctx: Context) -> None:
    _perm(ctx, "add", ctx.admin.add_write_perm(ctx.req("b")), ctx.req("b"))


def _maintenance_targets(ctx: Context) -> list[str]:
    if ctx.has("b"):
        return [ctx.req("b")]
    if ctx.has("c"):
        return list(cluster_masters(ctx, ctx.req("c")).values())
    return all_masters(ctx)


@command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.", [
    Opt("b", "brokerAddr", True, "Broker address"),
    Opt("c", "cluster", True, "clustername"),
])
def clean_expired_cq(ctx: Context) -> None:
    ok = True
    for addr in _maintenance_targets(ctx):
        ok = call_or_unsupported(ctx, "CLEAN_EXPIRED_CONSUMEQUEUE", addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
                                 ctx.admin.clean_expired_consume_queue, addr) and ok
    ctx.print("success" if ok else "false")


@command("deleteExpiredCommitLog", "Delete expired CommitLog files", [
    Opt("b", "brokerAddr", True, "Broker address"),
    Opt("c", "cluster", True, "clustername"),
])
def delete_expired_commit_log(ctx: Context) -> None:
    ok = True
    for addr in _maintenance_targets(ctx):
        ok = call_or_unsupported(ctx, "DELETE_EXPIRED_COMMITLOG", addr, RequestCode.DELETE_EXPIRED_COMMITLOG,
                                 ctx.admin.delete_expired_commit_log, addr) and ok
    ctx.print("success" if ok else "false")


class _Stats:
    """315 VIEW_BROKER_STATS_DATA per broker; a broker that does not serve it counts 0, said once on stderr."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.unsupported: set[str] = set()

    def get(self, addr: str, name: str, key: str) -> tuple[float, int]:
        if addr in self.unsupported:
            return 0.0, 0
        try:
            data = self.ctx.admin.view_broker_stats(addr, name, key)
        except ClientError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                self.unsupported.add(addr)
                self.ctx.warn(f"the broker at {addr} does not support VIEW_BROKER_STATS_DATA (request code "
                              f"{int(RequestCode.VIEW_BROKER_STATS_DATA)}): its TPS and 24-hour columns count 0")
            return 0.0, 0
        sums = [int((data.get(k) or {}).get("sum", 0)) for k in ("statsDay", "statsHour", "statsMinute")]
        return float((data.get("statsMinute") or {}).get("tps", 0.0)), next((s for s in sums if s), 0)


@command("statsAll", "Topic and Consumer tps stats", [
    Opt("a", "activeTopic", False, "print active topic only"),
    Opt("t", "topic", True, "print select topic only"),
])
def stats_all(ctx: Context) -> None:
    ctx.print("%-64s  %-64s %12s %11s %11s %14s %14s%n", "#Topic", "#Consumer Group", "#Accumulation", "#InTPS",
              "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour")
    active, select = ctx.has("a"), ctx.get("t")
    stats = _Stats(ctx)
    for topic in ctx.admin.topic_list():
        if topic.startswith(RETRY) or topic.startswith(DLQ) or (select and topic != select):
            continue
        try:
            route = route_of(ctx, topic)
        except (ClientError, OSError):
            continue
        masters = [b["brokerAddrs"]["0"] for b in route["brokerDatas"] if "0" in b["brokerAddrs"]]
        in_tps, in_today = 0.0, 0
        for addr in masters:
            tps, total = stats.get(addr, "TOPIC_PUT_NUMS", topic)
            in_tps, in_today = in_tps + tps, in_today + total
        groups = sorted({g for a in masters for g in ctx.admin.topic_consumed_by(a, topic)})
        if not groups:
            if not active or in_today > 0:
                ctx.print("%-64s  %-64s %12d %11.2f %11s %14d %14s%n", front(topic, 64), "", 0, in_tps, "", in_today,
                          "NO_CONSUMER")
            continue
        for group in groups:
            out_tps, out_today = 0.0, 0
            for addr in masters:
                tps, total = stats.get(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
                out_tps, out_today = out_tps + tps, out_today + total
            try:
                rows = ctx.admin.consume_stats(group, topic)["offsetTable"]
                accumulate = max(0, sum(r["maxOffset"] - max(r["consumerOffset"], 0) for r in rows))
            except ClientError:
                accumulate = 0
            if not active or in_today > 0 or out_today > 0:
                ctx.print("%-64s  %-64s %12d %11.2f %11.2f %14d %14d%n", front(topic, 64), front(group, 64),
                          accumulate, in_tps, out_tps, in_today, out_today)
