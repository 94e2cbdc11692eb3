"""updateAclConfig, deleteAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr: ACL 1.0 (request codes 50-53).

A broker that does not serve a code (RocketMQ 5.3.3+, or 4.9.8's 54) answers REQUEST_CODE_NOT_SUPPORTED, and the
command says so and exits 2; this product's broker serves them with ``aclEnable=true`` (server/acl_admin.py) and
answers ``The broker does not enable acl.`` without."""

from __future__ import annotations

import json
from typing import Any

from broker_core.protocol import RequestCode
from broker_core.tools.mqadmin.cli import Context, Opt, command
from broker_core.tools.mqadmin.commands.common import call_or_unsupported, cluster_masters, targets
from broker_core.tools.mqadmin.fmt import date_s


@command("updateAclConfig", "Update acl config yaml file in broker", [
    Opt("b", "brokerAddr", True, "update acl config file to which broker"),
    Opt("c", "clusterName", True, "update acl config file to which cluster"),
    Opt("a", "accessKey", True, "set accessKey in acl config file", required=True),
    Opt("s", "secretKey", True, "set secretKey in acl config file", required=True),
    Opt("w", "whiteRemoteAddress", True, "set white ip Address for account in acl config file"),
    Opt("i", "defaultTopicPerm", True, "set default topicPerm in acl config file"),
    Opt("u", "defaultGroupPerm", True, "set default GroupPerm in acl config file"),
    Opt("t", "topicPerms", True, "set topicPerms list,eg: topicA=DENY,topicD=SUB"),
    Opt("g", "groupPerms", True, "set groupPerms list,eg: groupD=DENY,groupD=SUB"),
    Opt("m", "admin", True, "set admin flag in acl config file"),
], group=("b", "c"))
def update_acl_config(ctx: Context) -> None:
    account: dict[str, Any] = {"accessKey": ctx.req("a"), "secretKey": ctx.req("s"),
                               "admin": "true" if ctx.truth("m", False) else "false"}
    for short, key in (("w", "whiteRemoteAddress"), ("i", "defaultTopicPerm"), ("u", "defaultGroupPerm"),
                       ("t", "topicPerms"), ("g", "groupPerms")):
        if ctx.has(short):
            account[key] = ctx.req(short)
    for addr in targets(ctx, with_slaves=True):
        call_or_unsupported(ctx, "UPDATE_AND_CREATE_ACL_CONFIG", addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                            ctx.admin.update_acl_config, addr, account)
        ctx.print("create or update plain access config to %s success.%n", addr)


@command("deleteAclConfig", "Delete Acl Config Account in broker", [
    Opt("b", "brokerAddr", True, "delete acl config account from which broker"),
    Opt("c", "clusterName", True, "delete acl config account from which cluster"),
    Opt("a", "accessKey", True, "set accessKey in acl config file for deleting which account", required=True),
], group=("b", "c"))
def delete_acl_config(ctx: Context) -> None:
    key = ctx.req("a")
    for addr in targets(ctx, with_slaves=True):
        call_or_unsupported(ctx, "DELETE_ACL_CONFIG", addr, RequestCode.DELETE_ACL_CONFIG,
                            ctx.admin.delete_acl_config, addr, key)
        ctx.print("delete plain access config account from %s success.%n", addr)
    ctx.print("account's accesskey is:%s", key)


@command("clusterAclConfigVersion", "List all of acl config version information in cluster", [
    Opt("b", "brokerAddr", True, "query acl config version for which broker"),
    Opt("c", "clusterName", True, "query acl config version for specified cluster"),
], group=("b", "c"))
def cluster_acl_config_version(ctx: Context) -> None:
    addrs = [ctx.req("b")] if ctx.has("b") else list(cluster_masters(ctx, ctx.req("c")).values())
    infos = [call_or_unsupported(ctx, "GET_BROKER_CLUSTER_ACL_INFO", a, RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
                                 ctx.admin.acl_version_info, a) for a in addrs]
    ctx.print("get %s's plain access config version success.%n", "broker" if ctx.has("b") else "cluster")
    ctx.print("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s%n", "#Cluster Name", "#Broker Name", "#Broker Addr",
              "#AclFilePath", "#AclConfigVersionNum", "#AclLastUpdateTime")
    for info in infos:
        for path, ver in sorted(json.loads(info.get("allAclFileVersion") or "{}").items()):
            ctx.print("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s%n", info.get("clusterName"), info.get("brokerName"),
                      info.get("brokerAddr"), path, str(ver.get("counter")), date_s(int(ver.get("timestamp", 0))))


@command("updateGlobalWhiteAddr", "Update global white address for acl Config File in broker", [
    Opt("b", "brokerAddr", True, "update global white address to which broker"),
    Opt("c", "clusterName", True, "update global white address to which cluster"),
    Opt("g", "globalWhiteRemoteAddresses", True, "set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*",
        required=True),
    Opt("p", "aclFileFullPath", True, "update global white address of specified acl file,eg: /xxx/plain_test.yml"),
], group=("b", "c"))
def update_global_white_addr(ctx: Context) -> None:
    for addr in targets(ctx, with_slaves=True):
        call_or_unsupported(ctx, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG", addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                            ctx.admin.update_global_white_addrs, addr, ctx.req("g"), ctx.get("p"))
        ctx.print("update global white remote addresses to %s success.%n", addr)
