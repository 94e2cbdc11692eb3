"""Lookups several commands share: masters of a cluster, a topic's route, a broker's name, name server calls."""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.tools.mqadmin.cli import CommandFailed, Context, unsupported


def cluster_masters(ctx: Context, cluster: str) -> dict[str, str]:
    """``{brokerName: master address}`` of the cluster (``CommandUtil.fetchMasterAddrByClusterName``)."""
    info = ctx.admin.cluster_info()
    names = info.get("clusterAddrTable", {}).get(cluster)
    if names is None:
        raise CommandFailed(f"no cluster named {cluster} is registered with the name server")
    out = {}
    for name in sorted(names):
        addr = info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {}).get("0")
        if addr:
            out[name] = addr
    return out


def all_masters(ctx: Context) -> list[str]:
    """Every registered master address, by broker name."""
    table = ctx.admin.cluster_info().get("brokerAddrTable", {})
    return [str(table[n]["brokerAddrs"]["0"]) for n in sorted(table) if "0" in table[n].get("brokerAddrs", {})]


def cluster_addrs(ctx: Context, cluster: str) -> list[str]:
    """Masters and slaves of the cluster (``fetchMasterAndSlaveAddrByClusterName``)."""
    info = ctx.admin.cluster_info()
    names = info.get("clusterAddrTable", {}).get(cluster)
    if names is None:
        raise CommandFailed(f"no cluster named {cluster} is registered with the name server")
    return [addr for name in sorted(names)
            for _id, addr in sorted(info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {}).items(),
                                    key=lambda kv: int(kv[0]))]


def targets(ctx: Context, with_slaves: bool = False) -> list[str]:
    """The broker addresses a ``-b | -c`` command acts on."""
    if ctx.has("b"):
        return [ctx.req("b")]
    cluster = ctx.req("c")
    return cluster_addrs(ctx, cluster) if with_slaves else list(cluster_masters(ctx, cluster).values())


def broker_name_of(ctx: Context, addr: str) -> str:
    for name, data in ctx.admin.cluster_info().get("brokerAddrTable", {}).items():
        if addr in data.get("brokerAddrs", {}).values():
            return str(name)
    raise CommandFailed(f"no broker registered with the name server has the address {addr}")


def route_of(ctx: Context, topic: str) -> dict[str, Any]:
    try:
        return ctx.admin.topic_route(topic)
    except ClientError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            raise CommandFailed(f"No topic route info in name server for the topic: {topic}") from None
        raise


def namesrv_call(ctx: Context, code: RequestCode, header: dict[str, Any]) -> list[RemotingCommand]:
    return [ctx.admin.request(ns, code, header) for ns in ctx.admin.namesrv_addrs]


def call_or_unsupported(ctx: Context, what: str, addr: str, code: RequestCode, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, turning REQUEST_CODE_NOT_SUPPORTED into a clear CommandFailed naming the request."""
    try:
        return fn(*args)
    except ClientError as exc:
        if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise unsupported(what, code, addr) from None
        raise
