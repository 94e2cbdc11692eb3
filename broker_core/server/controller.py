"""BrokerController: the broker process's state and lifecycle.

Owns the MessageStore (used only through its public methods), the persisted topic/offset/group state, the
client tables, long polling and the RemotingServer; registers with every name server at start and every 30 s,
and unregisters on shutdown.

Start order: store (recovery) -> long polling -> services (transactions, receive/ack, snapshots) -> one
processor per request area, each given the services it uses -> server -> background loops -> registration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Protocol

from broker_core import __version__
from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.config import BrokerConfig
from broker_core.ha import BrokerHA
from broker_core.metrics import prom_enabled
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.headers import DEFAULT_TOPIC
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.server import Connection, Handler, RemotingServer
from broker_core.server import registration
from broker_core.server.acl import PlainAccessValidator
from broker_core.server.acl_admin import AclAdminProcessor
from broker_core.server.admin import AdminProcessor
from broker_core.server.admin_store import StoreAdminProcessor
from broker_core.server.broker2client import Broker2ClientProcessor
from broker_core.server.clients import ConsumerManager
from broker_core.server.consume import ConsumerProcessor
from broker_core.server.fast_failure import FastFailure
from broker_core.server.locks import RebalanceLockManager
from broker_core.server.long_polling import PullRequestHoldService
from broker_core.server.metrics import BrokerMetrics
from broker_core.server.pop import PopProcessor, PopService
from broker_core.server.produce import SendMessageProcessor
from broker_core.server.retry import SendBackProcessor
from broker_core.server.snapshot import SnapshotProcessor, expire_snapshots
from broker_core.server.state import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    ConsumerOffsetManager,
    SubscriptionGroupManager,
    TopicConfig,
    TopicConfigManager,
)
from broker_core.server.stats import Stats
from broker_core.server.topic_batch import TopicBatchProcessor
from broker_core.server.trace import Tracer
from broker_core.server.transactions import EndTransactionProcessor, TransactionService
from broker_core.store import DeliveryReport, MessageStore, OffsetClock, file_disk_probe

log = logging.getLogger(__name__)


class Processor(Protocol):
    """One request area: the handlers of its codes (dependencies are given to its constructor)."""

    def handlers(self) -> dict[int, Handler]: ...


class BrokerController:
    def __init__(self, config: BrokerConfig, store: MessageStore | None = None) -> None:
        self.config = config
        # The store's clock, shifted by clockOffsetMs; UPDATE_BROKER_CONFIG may move it while running
        # (None for a store given with a clock of its own)
        self.clock: OffsetClock | None = None
        if store is None:
            self.clock = OffsetClock(config.clock_offset_ms)
            store = MessageStore(config, self.clock, file_disk_probe(Path(config.disk_usage_probe_file))
                                 if config.disk_usage_probe_file else None)
        self.store = store
        self.topics = TopicConfigManager(config.config_dir)
        self.offsets = ConsumerOffsetManager(config.config_dir)
        self.groups = SubscriptionGroupManager(config.config_dir)
        self.consumers = ConsumerManager()
        self.locks = RebalanceLockManager()
        self.tracer = Tracer(self)
        self.transactions = TransactionService(self)
        self.pop_service = PopService(self)
        self.fast_failure = FastFailure(self)  # sends refused SYSTEM_BUSY while the store is held
        self.snapshots = self.store.segment_snapshots(lambda: self.broker_addr)
        self.stats = Stats()
        # the RemotingServer's rpc_hook; idle while aclEnable is false
        self.acl = PlainAccessValidator(config.acl, config.acl_file_path)
        self.namesrv_addrs = [a.strip() for a in config.namesrv_addr.split(";") if a.strip()]
        self.namesrv_client = RemotingClient(serialize_type=SERIALIZE_JSON)  # as Java brokers register
        self.hold: PullRequestHoldService | None = None
        self.server: RemotingServer | None = None
        self.port = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.metrics: BrokerMetrics | None = None  # with metricsExporterType=PROM, from start()
        self.metrics_port = 0
        self._background: set[asyncio.Task[None]] = set()
        self.registered = False
        self._registered_version: dict[str, int] | None = None  # topic DataVersion of the last full registration
        self._registrations = registration.Coalescer(self._register_once)
        self.master_addr = ""  # a slave's master, as the name server answers registration
        self.master_ha_addr = ""
        self.order_topic_config: dict[str, str] | None = None  # ORDER_TOPIC_CONFIG from the registration answer
        self.grpc: Any = None  # broker_core.grpc.server.GrpcServer when grpcListenPort >= 0
        self.grpc_host: str | None = None  # --grpc-listen's host (else the remoting listen host)
        self.grpc_port = 0
        self.ha: Any = BrokerHA(self)  # replication: the HA listener; on a slave also the HA client and config sync
        self.replicas: Any = None  # controller mode (enableControllerMode): server/replicas.py ReplicasManager
        if config.controller.enable_controller_mode:
            from broker_core.ha.autoswitch import AutoSwitchBrokerHA
            from broker_core.server.replicas import ReplicasManager

            self.ha = AutoSwitchBrokerHA(self)  # fenced until a controller gives it a role
            self.replicas = ReplicasManager(self, self.ha)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a background coroutine, keeping a reference until it ends."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def broker_addr(self) -> str:
        return f"{self.config.broker_ip}:{self.port}"

    async def start(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        if self.config.acl.acl_enable:
            self.acl.load()  # a missing or invalid plain_acl.yml stops the start (AclConfigError names the file)
        self.config.config_dir.mkdir(parents=True, exist_ok=True)
        if self.config.auto_create_topic_enable and self.topics.get(DEFAULT_TOPIC) is None:
            # RocketMQ's template: clients fall back to TBW102's route to send to a topic that does not exist yet
            self.topics.upsert(TopicConfig(DEFAULT_TOPIC, 8, 8, PERM_READ | PERM_WRITE | PERM_INHERIT))
        if not self.store.running:
            await loop.run_in_executor(None, self.store.start)
        remoting = self.config.remoting
        self.hold = PullRequestHoldService(loop, remoting.max_held_pulls_per_connection)
        self.hold.on_wait = self.store.reput.undefer  # a held pull sees the next append dispatched at once
        self.store.add_arrival_listener(self.hold.arrived)
        # dispatch on this loop after appends (store/dispatcher.py): at once while pulls are held or slaves attached
        self.store.reput.drive_from(loop, self._arrivals_awaited)
        self.transactions.load()
        self.pop_service.load()
        from broker_core.grpc.timer import TimerService  # TIMER_* sends and gRPC delivery_timestamp: one timer

        self.timer = TimerService(self)
        self.timer.load()
        sends = SendMessageProcessor(self, self.transactions, self.timer)
        processors: list[Processor] = [
            sends, ConsumerProcessor(self), SendBackProcessor(self),
            PopProcessor(self, self.pop_service), EndTransactionProcessor(self, self.transactions),
            SnapshotProcessor(self.snapshots, self.config.snapshot_max_lifetime_ms), AdminProcessor(self),
            StoreAdminProcessor(self), Broker2ClientProcessor(self), TopicBatchProcessor(self),
            AclAdminProcessor(self)]
        handlers: dict[int, Handler] = {}
        for processor in processors:
            handlers.update(processor.handlers())
        if prom_enabled(self.config.metrics.metrics_exporter_type):  # Prometheus /metrics (server/metrics.py)
            self.metrics = BrokerMetrics(self)
            handlers = self.metrics.instrument(handlers)
            self.metrics_port = self.metrics.start(self.config.metrics.metrics_prom_exporter_host or host,
                                                   self.config.metrics.metrics_prom_exporter_port)
        self.server = RemotingServer(
            f"broker {self.config.broker_name}", handlers, max_frame_bytes=remoting.server_max_frame_bytes,
            idle_timeout=remoting.server_channel_max_idle_time_s, max_inflight=remoting.server_max_inflight,
            on_close=self._connection_closed, rpc_hook=self.acl,
            write_buffer_high=remoting.write_buffer_high_water_mark_bytes,
            write_buffer_low=remoting.write_buffer_low_water_mark_bytes)
        self.server.lane = sends.lane  # one plain SEND_MESSAGE_V2 a read, answered in one C call (send_fast.py)
        self.port = await self.server.start(host, port)
        await self._listen_vip(host, port)
        self.store.set_store_port(self.port)
        await self.ha.start(host, self.port)
        if self.replicas is not None:
            self.server.handlers.update(self.replicas.handlers())  # 1008 from the controllers, 1007 from admins
            self.replicas.start()
        if self.config.grpc.grpc_listen_port >= 0:  # RocketMQ 5 clients (broker_core/grpc), in the same process
            from broker_core.grpc.server import GrpcServer

            self.grpc = GrpcServer(self, self.config.grpc, self.timer)
            self.grpc_port = await self.grpc.start(self.grpc_host or host, self.config.grpc.grpc_listen_port)
        self._tasks.append(asyncio.ensure_future(self._periodic()))
        self._tasks.append(asyncio.ensure_future(expire_snapshots(
            self.snapshots, max_lifetime_ms=self.config.snapshot_max_lifetime_ms)))
        self._tasks.append(asyncio.ensure_future(self.timer.run()))  # delivers only while this broker is no slave
        if self.config.timer.schedule_deliver_interval_ms > 0 and not self.ha.is_slave:  # a slave only copies progress
            self._tasks.append(asyncio.ensure_future(self._deliver_delayed()))
        if not self.fenced:
            await self.register_all()
        log.info("broker %s serving on %s:%d (namesrv %s)", self.config.broker_name, host, self.port,
                 ";".join(self.namesrv_addrs) or "none")
        return self.port

    def _arrivals_awaited(self) -> bool:
        """Something waits for the next dispatch: a held pull, pop or receive, or a slave to send records to."""
        hold = self.hold
        return (hold is not None and hold.waiting_count > 0) or bool(self.ha.service.connections)

    async def _listen_vip(self, host: str, port: int) -> None:
        """RocketMQ's "VIP channel": Java clients up to 4.4 send to ``listenPort - 2`` by default. Served only
        when the listen port is fixed (an ephemeral port has no meaningful neighbour) and the config asks."""
        if not self.config.remoting.fast_listen_enable or port <= 2:
            return
        vip = port - 2
        try:
            await self.server.listen_also(host, vip)  # type: ignore[union-attr]  # set by start() before this runs
            log.info("broker %s also serves the VIP port %s:%d", self.config.broker_name, host, vip)
        except OSError as exc:
            log.warning("cannot listen on the VIP port %s:%d (Java clients before 4.5 use it): %s", host, vip, exc)

    async def _periodic(self) -> None:
        period = self.config.register_name_server_period_ms / 1000
        next_register = time.monotonic() + period
        next_check = time.monotonic() + self.config.transaction.transaction_check_interval_ms / 1000
        next_offsets = time.monotonic() + self.config.flush_consumer_offset_interval_ms / 1000
        while True:
            await asyncio.sleep(1.0)
            self.stats.sample()
            if time.monotonic() >= next_offsets:  # flushConsumerOffsetInterval (5 s, as the seeds)
                next_offsets = time.monotonic() + self.config.flush_consumer_offset_interval_ms / 1000
                try:
                    await asyncio.get_running_loop().run_in_executor(None, self.offsets.persist)
                except OSError:
                    log.exception("cannot persist consumer offsets")
            for group in set(self.consumers.scan_expired()):
                self.consumers.notify_changed(group)
            if not self.ha.is_slave:  # a slave writes nothing: no revives, no transaction checks
                self.pop_service.revive()
            try:  # the receive/ack journal: fsynced once a second (ASYNC_FLUSH), compacted when it grows
                await asyncio.get_running_loop().run_in_executor(None, self.pop_service.state.sync)
                self.pop_service.state.maybe_compact()
            except OSError:
                log.exception("cannot sync or compact the receive/ack state")
            if time.monotonic() >= next_check and not self.ha.is_slave:
                next_check = time.monotonic() + self.config.transaction.transaction_check_interval_ms / 1000
                self.transactions.check()
            if (time.monotonic() >= next_register or not self.registered) and not self.fenced:
                # a master's unchanged heartbeat is QUERY_DATA_VERSION only, unless forceRegister; a slave (it
                # learns its master from the answer) and controller mode always register in full
                ok = await self.register_all(force=self.config.force_register or self.ha.is_slave
                                             or self.replicas is not None)
                next_register = time.monotonic() + (period if ok else 2.0)

    async def _deliver_delayed(self) -> None:
        """The broker's own delay-level tick (Celery beat may call DELIVER_DELAYED too; passes serialise)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.timer.schedule_deliver_interval_ms / 1000)
            try:
                report = await loop.run_in_executor(None, self.store.deliver_delayed)
            except (OSError, ValueError):
                log.exception("delay-level delivery failed")
                continue
            self.trace_delayed_delivery(report)

    def trace_delayed_delivery(self, report: DeliveryReport) -> None:
        if self.tracer.enabled and report.delivered_messages:
            self.tracer.emit([self.tracer.event("delivered-after-delay", msg_id, topic, keys=keys, timestamp=ts)
                              for msg_id, topic, keys, ts in report.delivered_messages])

    def _connection_closed(self, conn: Connection) -> None:
        for client_id in conn.attributes.get("lock_clients", ()):
            self.locks.release_client(client_id)
        for group in set(self.consumers.connection_closed(conn)):
            self.consumers.notify_changed(group)

    # ------------------------------------------------------------------ name servers
    def _registration_header(self) -> dict[str, object]:
        return registration.header(self.config, self.broker_addr)

    def registration_request(self) -> RemotingCommand:
        return registration.request(self.config, self.broker_addr, self.topics, self.ha.server_addr,
                                    self.replicas.state_version if self.replicas is not None else None)

    @property
    def fenced(self) -> bool:
        """Controller mode before the controller gave a role: no name-server registration (§3.1)."""
        return self.replicas is not None and self.ha.fenced

    def _signed(self, cmd: RemotingCommand) -> RemotingCommand:
        return registration.signed(cmd, self.config.cluster_secret)

    async def register_all(self, force: bool = True) -> bool:
        """Register with every name server; False if any failed (the periodic task retries in 2 s).

        As upstream ``BrokerController.doRegisterBrokerAll``, the first successful answer sets ``master_addr``
        (a slave's master, "" when the name server knows no live master), ``master_ha_addr`` (only when the
        answer has one) and ``order_topic_config`` (the ``ORDER_TOPIC_CONFIG`` KVTable, None when absent).
        ``force=False`` (upstream ``registerBrokerAll(.., forceRegister=false)``): when the topic DataVersion is
        the one last registered in full and every name server answers QUERY_DATA_VERSION unchanged (which
        refreshes the broker's liveness there), nothing more is sent."""
        version = registration.data_version(
            self.topics, self.replicas.state_version if self.replicas is not None else None)
        if not force and self.registered and version == self._registered_version \
                and not await self._name_servers_changed(version):
            return True
        return await self._registrations()  # concurrent callers share one run (registration.Coalescer)

    async def _register_once(self, follow_up: bool) -> bool:
        state_version = self.replicas.state_version if self.replicas is not None else None
        snap = self.topics.snapshot()
        version = registration.snapshot_version(snap, state_version)
        if follow_up and self.registered and version == self._registered_version:
            return True  # the run that just ended, after these callers asked, registered this very state
        # built in a thread: at 50k topics the join and deflate take ~0.1 s (zlib releases the GIL)
        request = await registration.build_request(self.config, self.broker_addr, self.topics, self.ha.server_addr,
                                                   state_version, snap)
        ok, first = await registration.send_to_all(self.namesrv_client, self.namesrv_addrs, request, self._signed)
        if first is not None:
            ha_before = self.ha.master_ha_addr()
            self.master_addr = str(first.header.get("masterAddr") or "")
            ha = first.header.get("haServerAddr")
            if ha:
                self.master_ha_addr = str(ha)
            self.order_topic_config = registration.kv_table(first.body)
            self.ha.master_address_learned(ha_before)
        self.registered = ok
        self._registered_version = version if ok else None
        return ok

    async def _name_servers_changed(self, version: dict[str, int]) -> bool:
        """Upstream ``needRegister``: True when any name server does not hold ``version`` (or cannot be asked)."""
        for addr in self.namesrv_addrs:
            try:
                resp = await self.namesrv_client.invoke(
                    addr, self._signed(registration.query_data_version(self.config, self.broker_addr, version)), 3.0)
            except (ConnectionError, TimeoutError) as exc:
                log.warning("cannot query the data version of namesrv %s: %s", addr, exc)
                return True
            if registration.name_server_changed(resp, version):
                return True
        return False

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER (``brokerName, brokerAddr, clusterName, brokerId``) to every name server."""
        for addr in self.namesrv_addrs:
            cmd = self._signed(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, self._registration_header()))
            try:
                resp = await self.namesrv_client.invoke(addr, cmd, 3.0)
                if resp.code != ResponseCode.SUCCESS:
                    log.warning("namesrv %s refused unregistration (code %d): %s", addr, resp.code, resp.remark)
            except (ConnectionError, TimeoutError) as exc:
                log.warning("cannot unregister from namesrv %s: %s", addr, exc)

    # ------------------------------------------------------------------ shutdown
    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.unregister_all()
        if self.hold is not None:
            self.hold.wake_all()
        if self.grpc is not None:
            await self.grpc.stop()
        if self.server is not None:
            await self.server.close()
        await self.namesrv_client.close()
        if self.replicas is not None:
            await self.replicas.shutdown()
        await self.ha.shutdown()
        self.offsets.persist()
        self.pop_service.state.close()
        if self.metrics is not None:
            self.metrics.close()
        self.store.reput.detach()  # the store's own thread dispatches what is left
        await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)

    def _connection_info(self) -> dict[str, object]:
        """Back-pressure and long-polling figures (ours; RocketMQ consoles ignore keys they do not know)."""
        conns = list(self.server.connections) if self.server is not None else []
        return {"connections": len(conns), "connectionsPausedReading": sum(c.paused for c in conns),
                "unsentResponseBytes": sum(c.write_buffer_size for c in conns),
                "heldRequests": sum(c.held for c in conns),
                "popInflightMessages": sum(self.pop_service.state.inflight_by_group.values())}

    def runtime_info(self) -> dict[str, object]:
        put_tps, get_tps = self.stats.tps()
        disk = self.store.check_disk()
        return {
            "brokerName": self.config.broker_name, "brokerId": self.config.broker_id,
            "cluster": self.config.broker_cluster_name, "brokerAddr": self.broker_addr,
            "role": self.config.broker_role, "version": __version__, "flushDiskType": self.config.flush.flush_disk_type,
            "putTps": round(put_tps, 1), "getTps": round(get_tps, 1),
            "putTotal": self.stats.put_count, "getTotal": self.stats.get_count,
            "uptimeSeconds": round(time.monotonic() - self.stats.started, 1),
            "diskRatio": round(disk.ratio, 4), "topics": len(self.topics.table),
            "sendRefusedBusy": self.fast_failure.refused, "sendWaitingForStore": self.fast_failure.waiting,
            **self._connection_info(),
            **self.store.runtime_info(),
            **self.ha.runtime_info(),
        }
