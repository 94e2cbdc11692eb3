"""getControllerMetaData, getSyncStateSet, electMaster: RocketMQ 5's controller commands (the layouts of
``tools/command/controller`` and ``ha/GetSyncStateSetSubCommand``), through the SDK's ControllerAdmin."""

from __future__ import annotations

from broker_core.client.controller_admin import ControllerAdmin
from broker_core.protocol.controller_bodies import ReplicaIdentity
from broker_core.tools.mqadmin.cli import Context, Opt, UsageError, command


def _identity(r: ReplicaIdentity) -> str:
    """``ReplicaIdentity.toString``."""
    return (f"ReplicaIdentity{{brokerName='{r.broker_name}', brokerId={r.broker_id}, "
            f"brokerAddress='{r.broker_address}', alive={'true' if r.alive else 'false'}}}")


@command("getControllerMetaData", "Get controller cluster's metadata.", [
    Opt("a", "controllerAddress", True, "the address of controller", required=True),
])
def get_controller_metadata(ctx: Context) -> None:
    with ControllerAdmin(ctx.req("a")) as admin:
        meta = admin.metadata(ctx.req("a").split(";")[0])
    ctx.print("\n#ControllerGroup\t%s", meta.group)
    ctx.print("\n#ControllerLeaderId\t%s", meta.leader_id)
    ctx.print("\n#ControllerLeaderAddress\t%s", meta.leader_address)
    for peer_id, addr in meta.peers:
        ctx.print("\n#Peer:\t%s", f"{peer_id}:{addr}")
    ctx.print("\n")


@command("getSyncStateSet", "Fetch syncStateSet for target brokers.", [
    Opt("a", "controllerAddress", True, "the address of controller", required=True),
    Opt("c", "clusterName", True, "which cluster"),
    Opt("b", "brokerName", True, "which broker to fetch"),
    Opt("i", "interval", True, "the interval(second) of get info"),
])
def get_sync_state_set(ctx: Context) -> None:
    if ctx.has("b"):
        names = [ctx.req("b")]
    elif ctx.has("c"):
        names = sorted(ctx.admin.cluster_info().get("clusterAddrTable", {}).get(ctx.req("c"), []))
    else:
        raise UsageError("give -b/--brokerName or -c/--clusterName")
    with ControllerAdmin(ctx.req("a").split(";")[0]) as admin:
        table = admin.sync_state_data(names)
    for name, info in table.items():
        ctx.print("\n#brokerName\t%s\n#MasterBrokerId\t%s\n#MasterAddr\t%s\n#MasterEpoch\t%d\n#SyncStateSetEpoch\t%d\n"
                  "#SyncStateSetNums\t%d\n", name, info.master_broker_id, info.master_address, info.master_epoch,
                  info.sync_state_set_epoch, len(info.in_sync_replicas))
        for member in info.in_sync_replicas:
            ctx.print("\nInSyncReplica:\t%s\n", _identity(member))
        for member in info.not_in_sync_replicas:
            ctx.print("\nNotInSyncReplica:\t%s\n", _identity(member))


@command("electMaster", "Re-elect the specified broker as master.", [
    Opt("a", "controllerAddress", True, "The address of controller", required=True),
    Opt("b", "brokerId", True, "The id of the broker which requires to become master", required=True),
    Opt("bn", "brokerName", True, "The broker name of the replicas that require to be manipulated", required=True),
    Opt("c", "clusterName", True, "the clusterName of broker", required=True),
])
def elect_master(ctx: Context) -> None:
    cluster, name, broker_id = ctx.req("c"), ctx.req("bn"), ctx.num("b", 0)
    with ControllerAdmin(ctx.req("a")) as admin:
        result = admin.elect_master(cluster, name, broker_id)
    ctx.print("\n#ClusterName\t%s", cluster)
    ctx.print("\n#BrokerName\t%s", name)
    ctx.print("\n#BrokerMasterAddr\t%s", result.master_address)
    ctx.print("\n#MasterEpoch\t%s", result.master_epoch)
    ctx.print("\n#SyncStateSetEpoch\t%s\n", result.sync_state_set_epoch)
