"""mqadmin's controller commands (getControllerMetaData, getSyncStateSet, electMaster) against a real controller
process, with a broker-set of one that joined and heartbeats (FakeBroker speaks the broker's controller codes)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from broker_core.remoting.blocking import BlockingClient
from broker_core.tools.mqadmin import main
from tests.integration.cluster import start_ready, stop_process, wait_until
from tests.integration.controller_procs import FakeBroker, controller_confs

pytestmark = pytest.mark.integration


def mqadmin(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(args), out, err, env={})
    return rc, out.getvalue(), err.getvalue()


def test_controller_commands(tmp_path: Path) -> None:
    (conf,), (addr,) = controller_confs(tmp_path, 1)
    proc, _ports = start_ready(["-m", "broker_core.controller", "--config", str(conf)], tmp_path / "controller.log")
    broker = FakeBroker("DefaultCluster", "broker-c", [addr])
    client = BlockingClient()
    try:
        wait_until(lambda: "#ControllerLeaderId\tn0" in mqadmin("getControllerMetaData", "-a", addr)[1],
                   timeout=60, what="the controller to lead")
        rc, out, _ = mqadmin("getControllerMetaData", "-a", addr)
        assert rc == 0 and out == (f"\n#ControllerGroup\tgroup1\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t"
                                   f"{addr}\n#Peer:\tn0:{addr}\n")
        # the leader serves once its log is applied: a read through it answers instead of NOT_LEADER
        wait_until(lambda: mqadmin("getSyncStateSet", "-a", addr, "-b", "broker-c")[0] == 0, timeout=60,
                   what="the leader to serve")
        assert broker.join(client, addr) == 1
        broker.start_heartbeats()
        elected: list[str] = []

        def elect() -> bool:  # refused until the controller has the broker's first heartbeat
            rc, out, _err = mqadmin("electMaster", "-a", addr, "-c", "DefaultCluster", "-bn", "broker-c", "-b", "1")
            elected.append(out)
            return rc == 0

        wait_until(elect, timeout=60, what="the election of broker 1")
        out = elected[-1]
        assert out == (f"\n#ClusterName\tDefaultCluster\n#BrokerName\tbroker-c\n#BrokerMasterAddr\t{broker.addr}"
                       f"\n#MasterEpoch\t1\n#SyncStateSetEpoch\t1\n")
        rc, out, err = mqadmin("getSyncStateSet", "-a", addr, "-b", "broker-c")
        assert rc == 0, err
        assert out.startswith(f"\n#brokerName\tbroker-c\n#MasterBrokerId\t1\n#MasterAddr\t{broker.addr}\n"
                              "#MasterEpoch\t1\n#SyncStateSetEpoch\t1\n#SyncStateSetNums\t1\n")
        assert re.search(r"InSyncReplica:\tReplicaIdentity\{brokerName='broker-c', brokerId=1, brokerAddress='"
                         + re.escape(broker.addr) + r"', alive=true\}", out), out
        rc, _out, err = mqadmin("electMaster", "-a", addr, "-c", "DefaultCluster", "-bn", "broker-c")
        assert rc == 1 and "Missing required option: -b/--brokerId" in err
    finally:
        broker.stop()
        client.close()
        stop_process(proc, 20)
