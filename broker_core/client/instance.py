"""ClientInstance: what producers, consumers and the admin client share — the name-server connection,
the route cache (refreshed every 30 s), broker addresses, heartbeats and server notifications.

All network I/O runs on the process-wide client event loop (``broker_core.remoting.client``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker_core.client.message import ClientError, MessageQueue
from broker_core.codec.fastjson import items, loads_fastjson
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.headers import DEFAULT_TOPIC
from broker_core.remoting.client import RemotingClient, client_loop

log = logging.getLogger(__name__)

PERM_READ = 4
PERM_WRITE = 2
ROUTE_REFRESH_S = 30.0
HEARTBEAT_S = 30.0
BROKER_DOWN_S = 10.0  # how long an address that refused a connection is passed over for its group's others
NOTIFY_CONSUMER_IDS_CHANGED = int(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
RESET_CONSUMER_CLIENT_OFFSET = int(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)


def _broker_data(raw: Any) -> dict[str, Any]:
    """One ``BrokerData`` with ``brokerAddrs`` keyed by the broker id as text (``{"0": addr}``), whether the
    name server quoted the ids (4.9.4+, ours) or wrote them bare as fastjson does (``{0:"addr"}``)."""
    if not isinstance(raw, dict):
        raise ValueError(f"BrokerData must be an object, got {raw!r}")
    addrs = raw.get("brokerAddrs") or {}
    return {**raw, "brokerAddrs": {str(k): str(v) for k, v in items(addrs)}}


def decode_route(body: bytes) -> dict[str, Any]:
    """A ``TopicRouteData`` body (reference §5.2) in either JSON form, ``brokerAddrs`` keys as text; missing
    lists read as empty, ``filterServerTable`` as ``{}``."""
    doc = loads_fastjson(body)
    if not isinstance(doc, dict):
        raise ValueError("TopicRouteData must be a JSON object")
    route = {**doc, "brokerDatas": [_broker_data(b) for b in doc.get("brokerDatas") or []],
             "queueDatas": [dict(q) for q in doc.get("queueDatas") or [] if isinstance(q, dict)]}
    fst = doc.get("filterServerTable")
    route["filterServerTable"] = {str(k): v for k, v in items(fst)} if fst else {}
    return route


def decode_cluster_info(body: bytes) -> dict[str, Any]:
    """A ``ClusterInfo`` body ``{"brokerAddrTable":{name: BrokerData},"clusterAddrTable":{cluster:[names]}}``
    in either JSON form (a Java name server writes broker ids bare), ``brokerAddrs`` keys as text."""
    doc = loads_fastjson(body)
    if not isinstance(doc, dict):
        raise ValueError("ClusterInfo must be a JSON object")
    brokers = doc.get("brokerAddrTable") or {}
    clusters = doc.get("clusterAddrTable") or {}
    return {**doc, "brokerAddrTable": {str(k): _broker_data(v) for k, v in items(brokers)},
            "clusterAddrTable": {str(k): sorted(str(n) for n in v or []) for k, v in items(clusters)}}


@dataclass
class TopicRoute:
    topic: str
    queue_datas: list[dict[str, Any]]
    broker_datas: list[dict[str, Any]]
    write_queues: list[MessageQueue] = field(default_factory=list)
    read_queues: list[MessageQueue] = field(default_factory=list)
    order_topic_conf: str = ""

    @classmethod
    def from_wire(cls, topic: str, data: dict[str, Any]) -> TopicRoute:
        """Publish and subscribe queues as the Java client's ``topicRouteData2TopicPublishInfo`` /
        ``...SubscribeInfo``: publish queues of brokers with a master, subscribe queues of every broker in the
        route (a group whose master is gone is read from its slaves), by perm; with ``orderTopicConf``
        (``"broker-a:4;broker-b:4"``) the publish queues are exactly the ones it lists."""
        route = cls(topic, data.get("queueDatas", []), [_broker_data(b) for b in data.get("brokerDatas", [])],
                    order_topic_conf=str(data.get("orderTopicConf") or ""))
        masters = {b["brokerName"] for b in route.broker_datas if "0" in b.get("brokerAddrs", {})}
        known = {b["brokerName"] for b in route.broker_datas if b.get("brokerAddrs")}
        for q in sorted(route.queue_datas, key=lambda q: q["brokerName"]):
            if q["brokerName"] not in known:
                continue
            if q.get("perm", 6) & PERM_READ:
                route.read_queues += [MessageQueue(topic, q["brokerName"], i) for i in range(q["readQueueNums"])]
            if q["brokerName"] not in masters:
                continue
            if q.get("perm", 6) & PERM_WRITE:
                route.write_queues += [MessageQueue(topic, q["brokerName"], i) for i in range(q["writeQueueNums"])]
        if route.order_topic_conf:
            ordered = []
            for item in route.order_topic_conf.split(";"):
                name, sep, nums = item.strip().partition(":")
                if sep and name and nums.strip().isdigit():
                    ordered += [MessageQueue(topic, name, i) for i in range(int(nums))]
            if ordered:
                route.write_queues = ordered
        return route


def local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


_NAMED: dict[str, ClientInstance] = {}  # instance name -> the process's instance of that name (RocketMQ's clientId)
_NAMED_LOCK = threading.Lock()


def named_instance(instance_name: str, namesrv_addr: str, credentials: SessionCredentials | None) -> ClientInstance:
    """The process's one :class:`ClientInstance` named ``instance_name`` (RocketMQ's ``MQClientManager``: one
    instance per clientId ``ip@pid@name``, shared by every producer and consumer given that name: one set of
    connections, one heartbeat). Created on first use; the name server and credentials must match."""
    with _NAMED_LOCK:
        found = _NAMED.get(instance_name)
        if found is None or found.closed:
            found = _NAMED[instance_name] = ClientInstance(namesrv_addr, instance_name, credentials)
        elif found.namesrv_addrs != [a.strip() for a in namesrv_addr.split(";") if a.strip()] or (
                credentials is not None and credentials != found.credentials):
            raise ValueError(f"the client instance {instance_name!r} already exists with other name servers or "
                             "credentials: use another instance_name")
        return found


def shared_instance(instance: ClientInstance | None, namesrv_addr: str,
                    credentials: SessionCredentials | None, instance_name: str | None = None) -> ClientInstance:
    """``instance``; else the process's instance named ``instance_name`` (:func:`named_instance`); else a new
    private one on ``namesrv_addr`` signing with ``credentials``. Credentials given with an instance must be the
    instance's own (its connections are signed once, for every client sharing it)."""
    if instance is None and instance_name:
        return named_instance(instance_name, namesrv_addr, credentials)
    if instance is None:
        return ClientInstance(namesrv_addr, credentials=credentials)
    if credentials is not None and credentials != instance.credentials:
        raise ValueError("credentials differ from the shared ClientInstance's: give them to the ClientInstance")
    return instance


class ClientInstance:
    def __init__(self, namesrv_addr: str, instance_name: str | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        """``credentials``: sign every request (RocketMQ ACL ``AclClientRPCHook``); every client sharing this
        instance signs with them."""
        self.namesrv_addrs = [a.strip() for a in (namesrv_addr or "").split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ValueError("namesrv_addr is required, e.g. '127.0.0.1:9876'")
        self.client_id = f"{local_ip()}@{os.getpid()}@{instance_name or uuid.uuid4().hex[:8]}"
        self.credentials = credentials
        self.remoting = RemotingClient(on_request=self._on_server_request, credentials=credentials)
        self.loop = client_loop()
        self.routes: dict[str, TopicRoute] = {}
        self.broker_addrs: dict[str, str] = {}  # brokerName -> master address
        self.broker_tables: dict[str, dict[int, str]] = {}  # brokerName -> {brokerId: address}, slaves too
        self.down_until: dict[str, float] = {}  # address -> loop time until which it counts as unreachable
        self.heartbeat_sources: list[Callable[[], dict[str, Any]]] = []
        self.notification_handlers: dict[int, list[Callable[[RemotingCommand], None]]] = {}
        # broker-to-client calls answered by this instance (code -> handler returning the response or an awaitable)
        self.request_handlers: dict[int, Callable[[RemotingCommand], Any]] = {}
        self.consumer_table: dict[str, Any] = {}  # group -> the started consumer of it (RocketMQ's consumerTable)
        self._tasks: list[asyncio.Task[None]] = []
        self._refreshing: dict[str, asyncio.Future[TopicRoute]] = {}  # topic -> the route re-read under way
        self._ns_index = 0
        self.started = False
        self.closed = False
        self.users = 0  # clients started on this instance and not shut down yet
        self.producer_groups: set[str] = set()
        self.consumer_groups: set[str] = set()

    # ------------------------------------------------------------------ lifecycle (client loop)
    async def start(self) -> None:
        """Called by each client's start; the instance runs until the last of them shuts down."""
        self.users += 1
        if self.started:
            return
        self.started = True
        self.closed = False
        self._tasks.append(asyncio.ensure_future(self._timers()))

    async def shutdown(self) -> None:
        """Called by each client's shutdown: closes connections and timers when no client is left on it."""
        self.users = max(0, self.users - 1)
        if self.users:
            return
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()
        await self.remoting.close()
        self.started = False
        self.closed = True

    def register_producer(self, group: str) -> None:
        """RocketMQ's ``registerProducer``: one producer per group on an instance."""
        if group in self.producer_groups:
            raise ValueError(f"The producer group[{group}] has been created before, specify another name please.")
        self.producer_groups.add(group)

    def register_consumer(self, group: str) -> None:
        """RocketMQ's ``registerConsumer``: one consumer per group on an instance."""
        if group in self.consumer_groups:
            raise ValueError(f"The consumer group[{group}] has been created before, specify another name please.")
        self.consumer_groups.add(group)

    async def _timers(self) -> None:
        loop = asyncio.get_running_loop()
        next_route = loop.time() + ROUTE_REFRESH_S
        next_beat = loop.time() + HEARTBEAT_S
        while self.started:
            await asyncio.sleep(1.0)
            now = loop.time()
            if now >= next_route:
                next_route = now + ROUTE_REFRESH_S
                for topic in list(self.routes):
                    try:
                        await self.route(topic, refresh=True)
                    except (ClientError, ConnectionError, TimeoutError) as exc:
                        log.warning("route refresh of %s failed: %s", topic, exc)
            if now >= next_beat:
                next_beat = now + HEARTBEAT_S
                await self.heartbeat_all()

    def _on_server_request(self, addr: str, cmd: RemotingCommand) -> Any:
        """A request from a broker: notifications go to every handler of the code; a call (307, 309, 221) to its
        one answering handler, whose response (or awaitable of one) the connection writes back."""
        for handler in self.notification_handlers.get(cmd.code, []):
            handler(cmd)
        answer = self.request_handlers.get(cmd.code)
        return answer(cmd) if answer is not None else None

    # ------------------------------------------------------------------ requests
    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        return await self.remoting.invoke(addr, cmd, timeout)

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        last: Exception | None = None
        for i in range(len(self.namesrv_addrs)):
            addr = self.namesrv_addrs[(self._ns_index + i) % len(self.namesrv_addrs)]
            try:
                resp = await self.remoting.invoke(addr, RemotingCommand(cmd.code, 0, cmd.flags, cmd.header, cmd.body),
                                                  timeout)
                self._ns_index = (self._ns_index + i) % len(self.namesrv_addrs)
                return resp
            except (ConnectionError, TimeoutError) as exc:
                last = exc
        raise ConnectionError(f"no name server answered ({'; '.join(self.namesrv_addrs)}): {last}")

    async def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        route = self.routes.get(topic)
        if route is not None and not refresh:
            return route
        resp = await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if resp.code != ResponseCode.SUCCESS:
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                self.routes.pop(topic, None)
            raise ClientError(resp.code, resp.remark or f"no route for topic {topic}")
        try:
            data = decode_route(resp.body)
        except ValueError as exc:
            raise ClientError(int(ResponseCode.SYSTEM_ERROR), f"bad route body for topic {topic}: {exc}") from None
        route = TopicRoute.from_wire(topic, data)
        for b in route.broker_datas:
            addrs = b.get("brokerAddrs", {})
            self.broker_tables[b["brokerName"]] = {int(k): str(v) for k, v in addrs.items() if str(k).isdigit()}
            addr = addrs.get("0")
            if addr:
                self.broker_addrs[b["brokerName"]] = addr
        self.routes[topic] = route
        return route

    async def refresh_route(self, topic: str) -> TopicRoute | None:
        """Re-read ``topic``'s route now, after a send or pull failed (RocketMQ's client re-reads it when a send
        fails, a broker answers SERVICE_NOT_AVAILABLE or SYSTEM_ERROR, or the route has no writable queue):
        callers that fail at the same time share one request. None when the name server did not answer."""
        pending = self._refreshing.get(topic)
        if pending is None:
            pending = self._refreshing[topic] = asyncio.ensure_future(self.route(topic, refresh=True))
            pending.add_done_callback(lambda _f: self._refreshing.pop(topic, None))
        try:
            return await asyncio.shield(pending)
        except (ClientError, ConnectionError, TimeoutError):
            return None

    async def publish_route(self, topic: str, default_queue_nums: int) -> TopicRoute:
        """The route a producer sends ``topic`` by. When the name server knows none, RocketMQ's fallback: the
        brokers that carry the template topic ``TBW102`` (those with ``autoCreateTopicEnable``), each with
        ``min(default_queue_nums, its write queues)`` queues. The first send creates the topic there; the next
        route refresh finds it. Raises TOPIC_NOT_EXIST when no broker auto-creates topics."""
        try:
            return await self.route(topic)
        except ClientError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        refused = ClientError(int(ResponseCode.TOPIC_NOT_EXIST), f"no route for topic {topic}, and no broker "
                              "creates topics on first send (autoCreateTopicEnable is off)")
        try:
            template = await self.route(DEFAULT_TOPIC, refresh=True)
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise refused from None
            raise
        route = TopicRoute(topic, template.queue_datas, template.broker_datas)
        per_broker: dict[str, int] = {}
        for mq in template.write_queues:
            per_broker[mq.broker_name] = per_broker.get(mq.broker_name, 0) + 1
        for broker, nums in per_broker.items():
            route.write_queues += [MessageQueue(topic, broker, i) for i in range(min(default_queue_nums, nums))]
        if not route.write_queues:
            raise refused
        return route

    def broker_addr(self, broker_name: str) -> str:
        addr = self.broker_addrs.get(broker_name)
        if addr is None:
            raise ClientError(int(ResponseCode.SYSTEM_ERROR), f"broker {broker_name} has no known master address")
        return addr

    # ------------------------------------------------------------------ masters and slaves
    def mark_down(self, addr: str) -> None:
        """``addr`` did not answer: prefer another broker of its group for ``BROKER_DOWN_S`` seconds."""
        self.down_until[addr] = self.loop.time() + BROKER_DOWN_S

    def _up(self, addr: str) -> bool:
        until = self.down_until.get(addr)
        return until is None or until <= self.loop.time()

    def find_broker(self, broker_name: str, broker_id: int = 0) -> tuple[str, bool]:
        """The address to read from and whether it is a slave (Java's ``findBrokerAddressInSubscribe``): the
        suggested broker id's address, else the master, else any slave; one that failed recently counts only
        when nothing else is known."""
        table = self.broker_tables.get(broker_name) or {}
        master = self.broker_addrs.get(broker_name)
        if master is not None and 0 not in table:
            table = {**table, 0: master}
        if not table:
            raise ClientError(int(ResponseCode.SYSTEM_ERROR), f"broker {broker_name} has no known address")
        order = [broker_id, 0, *sorted(table)]
        for bid in order:
            addr = table.get(bid)
            if addr is not None and self._up(addr):
                return addr, bid != 0
        bid = broker_id if broker_id in table else min(table)
        return table[bid], bid != 0

    def admin_addr(self, broker_name: str) -> tuple[str, bool]:
        """Where offsets and queue queries go (Java's ``findBrokerAddressInAdmin``): the master, or a slave while
        the master is unreachable. Returns the address and whether it is a slave."""
        return self.find_broker(broker_name, 0)

    async def heartbeat_all(self) -> None:
        data: dict[str, Any] = {"clientID": self.client_id, "producerDataSet": [], "consumerDataSet": []}
        for source in self.heartbeat_sources:
            part = source()
            data["producerDataSet"] += part.get("producerDataSet", [])
            data["consumerDataSet"] += part.get("consumerDataSet", [])
        body = json.dumps(data).encode()
        addrs = set(self.broker_addrs.values())
        if data["consumerDataSet"]:  # consumers also tell slaves (they may pull from them), as Java's client
            addrs.update(a for table in self.broker_tables.values() for a in table.values())
        for addr in addrs:
            try:
                resp = await self.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body))
                if resp.code != ResponseCode.SUCCESS:
                    log.warning("heartbeat to %s refused: %s", addr, resp.remark)
            except (ConnectionError, TimeoutError) as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)
