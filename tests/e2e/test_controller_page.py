"""Browser check of controller mode on the cluster page: a name server with the embedded controller and two
stand-in brokers of one broker-set; an operator sees the master, epoch and SyncStateSet, follows "make master"
to the confirm page, confirms, and the page shows the new master, the new epoch and the switch-over in the
history."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from broker_core.client.controller_admin import ControllerAdmin
from broker_core.protocol import RemotingCommand
from broker_core.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ControllerRequestCode,
    ElectMasterRequestHeader,
    encode_sync_state_set,
)
from broker_core.remoting.blocking import BlockingClient
from console import broker_client
from console.models import AuditEvent
from console.monitoring.controller_sampling import sample_controller
from tests.e2e.conftest import shot
from tests.integration.cluster import start_ready, stop_process, wait_until
from tests.integration.controller_procs import FakeBroker

pytestmark = pytest.mark.integration

R = ControllerRequestCode
NAME = "broker-sw"


@pytest.fixture
def controller(tmp_path: Path, base_url: str, settings: Any,
               transactional_db: None) -> Iterator[tuple[str, list[FakeBroker]]]:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort = 0\nenableControllerInNamesrv = true\ncontrollerStorePath = {tmp_path / 'c'}\n")
    proc, ports = start_ready(["-m", "broker_core.namesrv", "--config", str(conf)], tmp_path / "namesrv.log")
    addr = f"127.0.0.1:{ports['port']}"
    admin, client = ControllerAdmin(addr), BlockingClient()
    brokers = [FakeBroker("DefaultCluster", NAME, [addr]) for _ in range(2)]

    def serving() -> bool:
        try:
            return admin.sync_state_data(["none"]) == {}
        except (OSError, RuntimeError):
            return False
    try:
        wait_until(serving, 60, "the embedded controller to serve")
        for b in brokers:
            b.join(client, addr)
            b.start_heartbeats()
        wait_until(lambda: all(r.alive for r in admin.sync_state_data([NAME])[NAME].not_in_sync_replicas), 30,
                   "both brokers alive")
        assert client.invoke(addr, RemotingCommand.request(
            R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader("DefaultCluster", NAME, 1).to_ext())).code == 0
        assert client.invoke(addr, RemotingCommand.request(
            R.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(NAME, 1, 1).to_ext(),
            encode_sync_state_set({1, 2}, 1))).code == 0
        # listed by the name server for one sampling (the stand-in serves no topics, so it leaves again; the
        # page then asks the controller about the sets the samples know)
        brokers[0].register_namesrv(client, addr)
        settings.BROKER_CORE_NAMESRV = addr
        settings.BROKER_CORE_CONTROLLER = addr
        assert sample_controller()["sets"] == 1
        brokers[0].unregister_namesrv(client, addr)
        yield addr, brokers
    finally:
        for b in brokers:
            b.stop()
        client.close()
        admin.close()
        broker_client.reset()
        stop_process(proc, 20)


def test_switch_over_from_the_cluster_page(page: Page, base_url: str, login: Callable[[Page, User], None],
                                           make_user: Callable[[str], User], dialogs: list[str],
                                           controller: tuple[str, list[FakeBroker]]) -> None:
    addr, brokers = controller
    operator = make_user("operator")
    login(page, operator)
    page.goto(f"{base_url}/cluster/")
    expect(page.get_by_test_id(f"controller-{NAME}-master")).to_contain_text(f"1 {brokers[0].addr}")
    expect(page.get_by_test_id(f"controller-{NAME}-epoch")).to_have_text("1")
    expect(page.get_by_test_id(f"controller-{NAME}")).to_contain_text("1, 2 (2)")  # SyncStateSet (epoch)
    expect(page.get_by_test_id(f"switch-{NAME}-1")).to_have_count(0)  # the master itself: no link
    shot(page, "40-cluster-controller")

    page.get_by_test_id(f"switch-{NAME}-2").click()
    expect(page.get_by_role("heading", name=f"Make broker 2 the master of {NAME}?")).to_be_visible()
    page.get_by_label(f"Type {NAME} to confirm").fill(NAME)
    page.get_by_test_id("switch-over-confirm").click()
    page.wait_for_url(f"{base_url}/cluster/")
    expect(page.locator(".flash")).to_contain_text(f"{NAME}: broker 2 is the master (masterEpoch 2).")
    expect(page.get_by_test_id(f"controller-{NAME}-master")).to_contain_text(f"2 {brokers[1].addr}")
    expect(page.get_by_test_id(f"controller-{NAME}-epoch")).to_have_text("2")
    expect(page.get_by_test_id(f"elections-{NAME}")).to_contain_text(
        f"epoch 2, 1 → 2 (switch-over by {operator.get_username()})")
    shot(page, "41-cluster-switched-over")
    assert AuditEvent.objects.filter(action="broker.switch_over", target=f"{NAME}/2", ok=True).count() == 1
    assert ControllerAdmin(addr).sync_state_data([NAME])[NAME].master_broker_id == 2
    assert dialogs == []
