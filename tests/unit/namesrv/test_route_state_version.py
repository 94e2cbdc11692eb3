"""RocketMQ 5 controller mode in the name server's routes (reference rocketmq-controller.md §3.6): a role switch
on one address replaces the old id, and a stale master (lower DataVersion stateVersion) cannot take id 0 back."""

from __future__ import annotations

from broker_core.namesrv.route_info import RouteInfoManager


def _v(state: int, counter: int = 1) -> dict[str, int]:
    return {"counter": counter, "stateVersion": state, "timestamp": 1}


def test_new_master_takes_id_zero_and_the_stale_one_is_ignored() -> None:
    routes = RouteInfoManager()
    topics = {"T": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
    routes.register_broker("c", "b", 0, "10.0.0.1:10911", topics, "10.0.0.1:10912", _v(1))
    routes.register_broker("c", "b", 2, "10.0.0.2:10911", topics, "10.0.0.2:10912", _v(1))
    # the slave is elected (epoch 2) and registers as id 0 from its own address: <2,addr> becomes <0,addr>
    routes.register_broker("c", "b", 0, "10.0.0.2:10911", topics, "10.0.0.2:10912", _v(2, 2))
    assert routes.broker_addr_table["b"].broker_addrs == {0: "10.0.0.2:10911"}
    # the deposed master, still on epoch 1, re-registers as id 0: ignored
    assert routes.register_broker("c", "b", 0, "10.0.0.1:10911", topics, "10.0.0.1:10912", _v(1, 3)) is None
    assert routes.broker_addr_table["b"].broker_addrs == {0: "10.0.0.2:10911"}
    # it joins as a slave (its controller id): a slave's answer names the new master and its HA address
    master = routes.register_broker("c", "b", 1, "10.0.0.1:10911", topics, "10.0.0.1:10912", _v(2, 4))
    assert master == "10.0.0.2:10911"
    assert routes.ha_server_addr(master) == "10.0.0.2:10912"
    assert routes.broker_addr_table["b"].broker_addrs == {0: "10.0.0.2:10911", 1: "10.0.0.1:10911"}


def test_without_state_version_registrations_behave_as_before() -> None:
    routes = RouteInfoManager()
    routes.register_broker("c", "b", 0, "a:1", {}, "", {"counter": 1, "timestamp": 1})
    routes.register_broker("c", "b", 0, "a:2", {}, "", {"counter": 1, "timestamp": 1})
    assert routes.broker_addr_table["b"].broker_addrs == {0: "a:2"}
