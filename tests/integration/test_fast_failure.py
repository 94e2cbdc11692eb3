"""Broker fast failure with a store held busy: while another thread holds the store's put lock, sends are answered
SYSTEM_BUSY ([TIMEOUT_CLEAN_QUEUE] after waiting ``waitTimeMillsInSendQueue``, [PC_SYNCHRONIZED] at once once the
lock has been held ``osPageCacheBusyTimeOutMills``), nothing is written for them, other requests keep being
served, and a producer retries on another broker.

The busy broker runs in this process (a real BrokerController serving TCP on its own event loop thread) so the
test can hold its put lock, as a put made off the loop (delayed delivery, topic deletion) does; the name server
and the other broker are separate processes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.client import RemotingClient, run_sync
from broker_core.server.controller import BrokerController
from tests.conftest import small_config
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

PC_MS, QUEUE_MS = 400, 100


class InProcessBroker:
    def __init__(self, store_dir: Path, namesrv: str) -> None:
        cfg = small_config(store_dir, broker_name="busy-a", namesrv_addr=namesrv, register_name_server_period_ms=1000,
                           os_page_cache_busy_timeout_ms=PC_MS, wait_time_mills_in_send_queue=QUEUE_MS)
        self.ctl = BrokerController(cfg)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self.ctl.start("127.0.0.1", 0), self.loop).result(60)
        self.addr = f"127.0.0.1:{self.port}"
        self._release = threading.Event()
        self._holder: threading.Thread | None = None

    def hold_store(self) -> None:
        """Take the put lock from another thread, as a long put would, until :meth:`release_store`."""
        cl = self.ctl.store.commit_log
        taken = threading.Event()

        def hold() -> None:
            with cl.put_lock:
                cl.begin_time_in_lock = cl.clock.now_ms()
                taken.set()
                self._release.wait(60)
                cl.begin_time_in_lock = 0
        self._release.clear()
        self._holder = threading.Thread(target=hold, daemon=True)
        self._holder.start()
        taken.wait(10)

    def release_store(self) -> None:
        self._release.set()
        assert self._holder is not None
        self._holder.join(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.ctl.shutdown(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, InProcessBroker]]:
    tmp = tmp_path_factory.mktemp("fast-failure")
    c = Cluster(tmp)
    busy: InProcessBroker | None = None
    try:
        c.add_brokers_registered({"calm-b": ""})
        busy = InProcessBroker(tmp / "busy-a", c.namesrv)
        with AdminClient(c.namesrv) as admin:
            wait_until(lambda: "busy-a" in admin.cluster_info().get("brokerAddrTable", {}), timeout=30,
                       what="busy-a to register")
            admin.create_topic("Busy", 1, 1)  # on both brokers
        yield c, busy
    finally:
        if busy is not None:
            busy.close()
        c.close()


def call(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    async def go() -> RemotingCommand:
        client = RemotingClient(serialize_type=SERIALIZE_JSON)
        try:
            return await client.invoke(addr, cmd, 10)
        finally:
            await client.close()
    return run_sync(go())


def send(addr: str, body: bytes) -> RemotingCommand:
    return call(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "ff-producers", "b": "Busy", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "",
        "j": 0, "k": False, "m": False}, body))


def max_offset(addr: str) -> int:
    resp = call(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Busy", "queueId": 0}))
    return int(resp.header["offset"])


def test_sends_answer_system_busy_while_the_store_is_held(setup: tuple[Cluster, InProcessBroker]) -> None:
    _, busy = setup
    before = max_offset(busy.addr)
    assert send(busy.addr, b"free").code == ResponseCode.SUCCESS
    busy.hold_store()
    try:
        queued = send(busy.addr, b"waits")  # waits for the lock, then gives up after waitTimeMillsInSendQueue
        assert queued.code == ResponseCode.SYSTEM_BUSY and queued.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
        assert max_offset(busy.addr) == before + 1  # other requests are served while the store is held
        wait_until(lambda: busy.ctl.store.put_lock_held_ms() > PC_MS, timeout=10, what="the lock held long")
        at_once = send(busy.addr, b"refused")
        assert at_once.code == ResponseCode.SYSTEM_BUSY
        assert at_once.remark == "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
    finally:
        busy.release_store()
    assert send(busy.addr, b"free again").code == ResponseCode.SUCCESS
    assert max_offset(busy.addr) == before + 2  # nothing was written for the refused sends


def test_a_producer_retries_on_another_broker(setup: tuple[Cluster, InProcessBroker]) -> None:
    cluster, busy = setup
    calm = cluster.brokers["calm-b"].addr
    producer = Producer("ff-retry", cluster.namesrv, send_timeout=10).start()
    try:
        producer.send(Message("Busy", b"route"))  # learn the route (two brokers, one queue each)
        busy_before, calm_before = max_offset(busy.addr), max_offset(calm)
        refused_before = busy.ctl.fast_failure.refused
        busy.hold_store()
        try:
            wait_until(lambda: busy.ctl.store.put_lock_held_ms() > PC_MS, timeout=10, what="the lock held long")
            results = [producer.send(Message("Busy", f"m{i}".encode())) for i in range(6)]
        finally:
            busy.release_store()
        assert {r.message_queue.broker_name for r in results if r.message_queue} == {"calm-b"}
        assert max_offset(busy.addr) == busy_before and max_offset(calm) == calm_before + 6
        assert busy.ctl.fast_failure.refused > refused_before  # the busy broker was tried and said SYSTEM_BUSY
    finally:
        producer.shutdown()


def test_async_sends_retry_elsewhere_as_retry_times_when_send_async_failed_says(
        setup: tuple[Cluster, InProcessBroker]) -> None:
    cluster, busy = setup
    retrying = Producer("ff-async", cluster.namesrv, send_timeout=10).start()
    no_retry = Producer("ff-async-none", cluster.namesrv, send_timeout=10, retry_times_when_send_async_failed=0,
                        latency_fault_enable=False).start()
    try:
        retrying.send(Message("Busy", b"route"))
        no_retry.send(Message("Busy", b"route"))
        busy.hold_store()
        try:
            wait_until(lambda: busy.ctl.store.put_lock_held_ms() > PC_MS, timeout=10, what="the lock held long")
            ok = [retrying.send_async(Message("Busy", f"a{i}".encode())) for i in range(4)]
            assert {f.result(10).message_queue.broker_name for f in ok} == {"calm-b"}  # type: ignore[union-attr]  # set by every send
            outcomes = [no_retry.send_async(Message("Busy", f"n{i}".encode())) for i in range(4)]
            errors = [f.exception(10) for f in outcomes]
        finally:
            busy.release_store()
        # round robin over both brokers: the sends that went to the busy one failed, with no retry
        assert any(e is not None and "[PC_SYNCHRONIZED]broker busy" in str(e) for e in errors)
        assert any(e is None for e in errors)
    finally:
        retrying.shutdown()
        no_retry.shutdown()
