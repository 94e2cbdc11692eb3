"""Automatic failover in controller mode (issue 34), real processes on loopback: a controller, a name server and a
group of three brokers with ``enableControllerMode=true`` and ``allAckInSyncStateSet=true``.

- SIGKILL of the master: a slave of the SyncStateSet becomes master, the SDK producer goes on without a restart,
  every acknowledged message is read back; the old master restarts as a slave, truncates what it wrote that the
  new master never had, and ends holding the new master's CommitLog byte for byte.
- A fenced or slave broker refuses writes (SERVICE_NOT_AVAILABLE 14), over remoting.
- GET_BROKER_EPOCH_CACHE (1007) answers the epoch file.
- minInSyncReplicas refuses writes with SYSTEM_ERROR while the SyncStateSet is too small.
- A slave whose HA connection drops leaves the SyncStateSet at once; the gRPC endpoint of a slave refuses writes.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, ClientError, Message, Producer, PullConsumer
from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.protocol.controller import ControllerRequestCode, decode_epoch_entry_cache
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import BrokerProcess, wait_until
from tests.integration.failover_cluster import (
    GROUP,
    TOPIC,
    FailoverGroup,
    LoggingProducer,
    check,
    controller_mode_conf,
    eval_list,
    read_group,
)
from tests.integration.test_ha_helpers import commit_log


@pytest.fixture
def group(tmp_path: Path):  # type: ignore[no-untyped-def]
    g = FailoverGroup(tmp_path, controllers=1, brokers=3)
    try:
        yield g.start()
    finally:
        g.close()


def test_master_killed_slave_takes_over_old_master_truncates(group: FailoverGroup) -> None:
    old = group.wait_master()
    producer = LoggingProducer(group.namesrv, "p1")
    producer.start()
    try:
        wait_until(lambda: len(producer.acks) >= 200, 60, "200 acknowledged sends")
        assert old.proc is not None
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait()
        killed_at, acked_before = time.monotonic(), len(producer.acks)
        new = group.wait_master(not_this=old)
        wait_until(lambda: len(producer.acks) >= acked_before + 200 and producer.acks[-1].at > killed_at, 60,
                   "200 more acknowledged sends on the new master")
        # the old master comes back on its address: it joins as a slave and truncates to the consistent point
        old.start(old.port)
        wait_until(lambda: (group.runtime(old) or {}).get("role") == "SLAVE"
                   and (group.runtime(old) or {}).get("haConnected") == "True", 60, "the old master to follow")
    finally:
        producer.stop()
    group.wait_in_sync(3)
    end = int((group.runtime(new) or {})["commitLogMaxOffset"])
    wait_until(lambda: all(int((group.runtime(b) or {}).get("commitLogMaxOffset", "-1")) == end
                           for b in group.members), 60, "every replica to hold the master's CommitLog")
    caches = group.epoch_caches()
    assert len({tuple(c) for c in caches.values()}) == 1, caches  # one history on every replica
    assert check(producer.acks, read_group(group.namesrv), caches) == []
    for b in group.members:
        b.stop()
    logs = {b.addr: commit_log(b.store_dir) for b in group.members}
    assert len({tuple(sorted(v.items())) for v in logs.values()}) == 1  # byte-identical CommitLogs


def test_slaves_refuse_writes_and_answer_their_epoch_cache(group: FailoverGroup) -> None:
    master = group.wait_master()
    with Producer("pg-refuse", group.namesrv).start() as producer:
        assert producer.send(Message(TOPIC, b"x")).status.name == "SEND_OK"
    client = BlockingClient()
    try:
        for b in group.members:
            resp = client.invoke(b.addr, RemotingCommand.request(ControllerRequestCode.GET_BROKER_EPOCH_CACHE), 5.0)
            assert resp.code == ResponseCode.SUCCESS
            cache = decode_epoch_entry_cache(resp.body)
            assert [e.epoch for e in cache.epoch_list] == [1]
            assert (cache.broker_id == 0) == (b is master) and cache.broker_name == master.name
            if b is master:
                continue
            with AdminClient(group.namesrv) as admin:
                assert admin.broker_runtime(b.addr)["role"] == "SLAVE"
            send = RemotingCommand.request(310, {"a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                                 "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0",
                                                 "k": "false", "m": "false"}, b"refused")
            refused = client.invoke(b.addr, send, 5.0)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    finally:
        client.close()
    try:
        with Producer("pg-after", group.namesrv).start() as producer:
            assert producer.send(Message(TOPIC, b"y")).status.name == "SEND_OK"
    except ClientError as exc:  # pragma: no cover - the message says why
        raise AssertionError(exc) from exc


def test_too_few_in_sync_replicas_refuse_writes(tmp_path: Path) -> None:
    """minInSyncReplicas=2 with the master alone in the SyncStateSet: SYSTEM_ERROR "in-sync replicas not enough",
    nothing stored; once a slave joins the set, sends are acknowledged."""
    g = FailoverGroup(tmp_path, controllers=1, brokers=1, broker_extra="minInSyncReplicas=2\n")
    try:
        g.start()
        master = g.wait_master()
        client = BlockingClient()
        try:
            send = RemotingCommand.request(310, {"a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                                 "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0",
                                                 "k": "false", "m": "false"}, b"refused")
            refused = client.invoke(master.addr, send, 5.0)
        finally:
            client.close()
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough")
        assert (g.runtime(master) or {})["commitLogMaxOffset"] == "0"
        g.brokers = 2
        (tmp_path / "b1").mkdir()
        g.members.append(BrokerProcess(GROUP, tmp_path / "b1" / "store", g.namesrv, tmp_path / "b1.log",
                                       controller_mode_conf(g.controller_addrs, "minInSyncReplicas=2\n")).start())
        g.wait_in_sync(2)
        with Producer("pg-min-isr", g.namesrv).start() as producer:
            assert producer.send(Message(TOPIC, b"ok")).status.name == "SEND_OK"
    finally:
        g.close()


def test_grpc_endpoint_of_a_slave_refuses_writes_and_forwards_to_the_master(tmp_path: Path) -> None:
    """The RocketMQ 5 gRPC SendMessage of a slave in controller mode never stores: a send already forwarded once
    is refused; a client's send is forwarded to the master (as the proxy's cluster mode), whose answer comes back.
    The master's answers OK once every SyncStateSet member has the message."""
    import grpc

    from broker_core.grpc.forward import FORWARDED_KEY
    from broker_core.grpc.stubs import pb, service_pb2_grpc, svc

    g = FailoverGroup(tmp_path, controllers=1, brokers=2,
                      broker_extra="grpcListenPort=0\nslaveSynchronizeInterval=500\n")
    try:
        g.start()
        master = g.wait_master()
        with Producer("pg-grpc", g.namesrv).start() as producer:  # the topic, on the master, then copied to slaves
            assert producer.send(Message(TOPIC, b"first")).status.name == "SEND_OK"
        slave = next(b for b in g.members if b is not master)
        wait_until(lambda: int((g.runtime(slave) or {}).get("haSlaveSyncRounds", "0")) >= 2, 60, "topic sync")
        codes = {}
        for b, name, metadata in ((master, "master", ()), (slave, "slave", ()),
                                  (slave, "slave, forwarded", ((FORWARDED_KEY, "test"),))):
            with grpc.insecure_channel(f"127.0.0.1:{b.grpc_port}") as ch:
                stub = service_pb2_grpc.MessagingServiceStub(ch)
                props = pb.SystemProperties(message_id=f"01{b.port:024X}{len(codes):06X}", body_encoding=pb.IDENTITY,
                                            message_type=pb.NORMAL)
                msg = pb.Message(topic=pb.Resource(name=TOPIC), body=b"over grpc", system_properties=props)
                resp = stub.SendMessage(svc.SendMessageRequest(messages=[msg]), metadata=metadata, timeout=10)
                codes[name] = resp.entries[0].status.code
        assert codes == {"master": pb.OK, "slave": pb.OK, "slave, forwarded": codes["slave, forwarded"]}
        assert codes["slave, forwarded"] != pb.OK
        consumer = PullConsumer("grpc-forward-check", g.namesrv).start()  # reads from the master
        try:
            bodies = [m.body for mq in consumer.fetch_queues(TOPIC) for m in consumer.pull(mq, 0, 32).messages]
        finally:
            consumer.shutdown()
        assert sorted(bodies) == [b"first", b"over grpc", b"over grpc"]  # the master's send and the forwarded one
    finally:
        g.close()


def test_a_slave_whose_connection_drops_leaves_the_sync_state_set_at_once(tmp_path: Path) -> None:
    """§3.4: the master checks its SyncStateSet as soon as a member's HA connection drops (the periodic check is
    set to ten minutes here, so only that path can shrink it), and takes the slave back once it caught up."""
    g = FailoverGroup(tmp_path, controllers=1, brokers=3, broker_extra="checkSyncStateSetPeriod=600000\n")
    try:
        g.start()
        master = g.wait_master()
        slave = next(b for b in g.members if b is not master)
        assert slave.proc is not None
        slave.proc.send_signal(signal.SIGKILL)
        slave.proc.wait()

        def sss() -> list[int]:
            info = g.runtime(master) or {}
            return sorted(eval_list(info.get("syncStateSet", "[]")))

        wait_until(lambda: len(sss()) == 2, 60, "the SyncStateSet to drop the killed slave")
        with Producer("pg-shrunk", g.namesrv).start() as producer:  # acknowledged by the two left
            assert producer.send(Message(TOPIC, b"after")).status.name == "SEND_OK"
        slave.start(slave.port)
        g.wait_in_sync(3)
    finally:
        g.close()


def test_plain_sdk_clients_follow_a_switch_over_and_a_kill(group: FailoverGroup,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A producer and a push consumer with the SDK's defaults, doing nothing of their own after a failure, follow
    two changes of master without a restart: a switch-over (1002: the old master stays up and answers
    SERVICE_NOT_AVAILABLE 14 as a slave) and then a SIGKILL of the new master (connections refused). The
    clients' 30 s route poll is set to an hour here, so only the SDK's own re-read after a failure can move them.
    Prints the time from each change to the producer's first send acknowledged by the next master."""
    import broker_core.client.instance as instance_mod
    from broker_core.client import ConsumeStatus, PushConsumer
    from broker_core.client.controller_admin import ControllerAdmin

    monkeypatch.setattr(instance_mod, "ROUTE_REFRESH_S", 3600.0)
    first = group.wait_master()
    producer = LoggingProducer(group.namesrv, "plain", plain=True)
    seen: set[str] = set()

    def listen(msgs: list[Any]) -> ConsumeStatus:
        seen.update(m.keys[0] for m in msgs if m.keys)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("fo-plain-consumer", group.namesrv, consume_from="FIRST")
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listen)
    producer.start()
    try:
        wait_until(lambda: len(producer.acks) >= 100, 60, "100 acknowledged sends")  # the topic exists now
        consumer.start()

        def follows(master: BrokerProcess, since: float) -> float:
            wait_until(lambda: any(a.at > since and a.store == master.addr for a in producer.acks[-50:]), 60,
                       f"a send acknowledged by the new master {master.addr}")
            return next(a.at for a in producer.acks if a.at > since and a.store == master.addr) - since

        with ControllerAdmin(";".join(group.controller_addrs)) as admin:
            info = admin.sync_state_data([GROUP])[GROUP]
            target = next(r for r in info.in_sync_replicas if r.broker_address != first.addr)
            switched_at = time.monotonic()
            admin.elect_master("DefaultCluster", GROUP, target.broker_id)
        second = next(b for b in group.members if b.addr == target.broker_address)
        after_switch = follows(second, switched_at)
        group.wait_in_sync(3)
        assert second.proc is not None
        second.proc.send_signal(signal.SIGKILL)
        second.proc.wait()
        killed_at = time.monotonic()
        third = group.wait_master(not_this=second)
        after_kill = follows(third, killed_at)
        wait_until(lambda: {a.key for a in producer.acks} <= seen, 60, "the consumer to read every acknowledged send")
    finally:
        producer.stop()
        consumer.shutdown()
    print(f"\nplain SDK producer: first send acknowledged by the new master {after_switch:.3f} s after the "
          f"switch-over, {after_kill:.3f} s after the SIGKILL; {len(producer.failures)} failed sends in all")
