"""QueryRoute and QueryAssignment: which brokers' gRPC endpoints serve a topic.

How a broker learns the other brokers' gRPC endpoints: each broker that serves gRPC writes its endpoint to the
name servers' KV config (RocketMQ's ``PUT_KV_CONFIG``, namespace :data:`KV_NAMESPACE`, key its remoting
address ``ip:port``, value ``ip:grpcPort``) at start and with every registration period, and deletes it at
shutdown. QueryRoute asks a name server for the topic's route (``GET_ROUTEINFO_BY_TOPIC``, the 4.x route every
client uses) and for that namespace (``GET_KVLIST_BY_NAMESPACE``), and answers each master whose remoting
address has an entry. No name-server change is needed (Java name servers take the same requests), and a
broker without gRPC simply has no entry, so its queues are left out. This broker's own queues carry the
endpoint the client dialled (as RocketMQ's proxy does in local mode), so a client behind a NAT or a host name
keeps using the address it knows. A client that dialled several addresses (every broker's, as for a proxy
cluster) gets, in controller mode, those addresses for the queues of this broker's group (a slave forwards
sends to its master, :mod:`broker_core.grpc.forward`, so its channel survives the master's death), and
otherwise this broker's own endpoint (any of those addresses may be a slave). Assignments (receives) always
name the master's own endpoint; after an election each broker answers the new master's as soon as the name
server has it.
Without name servers, or when they do not know the topic yet (a registration in flight), a master answers from
its own topic table (a slave never lists itself).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker_core.codec.fastjson import items, loads_fastjson
from broker_core.grpc.stubs import pb
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.server.state import PERM_READ, PERM_WRITE

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

KV_NAMESPACE = "BROKER_CORE_GRPC_ENDPOINTS"
ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
_CACHE_S = 2.0


@dataclass(frozen=True)
class BrokerQueues:
    name: str
    endpoint: str  # "host:port", or "" for this broker (the request's endpoints are echoed)
    read: int
    write: int
    perm: int


def endpoints(addr: str) -> Any:
    host, _, port = addr.rpartition(":")
    scheme = pb.IPv4 if host.replace(".", "").isdigit() else pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


def permission(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    return {(True, True): pb.READ_WRITE, (True, False): pb.READ, (False, True): pb.WRITE}.get(
        (readable, writable), pb.NONE)


class RouteService:
    def __init__(self, ctl: Broker, grpc_endpoint: str) -> None:
        self.ctl = ctl
        self.grpc_endpoint = grpc_endpoint  # "brokerIP1:grpcPort", what other brokers answer for this one
        self._kv: tuple[float, dict[str, str]] = (0.0, {})

    # ------------------------------------------------------------------ registration of our endpoint
    async def publish(self) -> None:
        """PUT_KV_CONFIG our endpoint to every name server (logged, retried with the next period on failure)."""
        for addr in self.ctl.namesrv_addrs:
            cmd = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {
                "namespace": KV_NAMESPACE, "key": self.ctl.broker_addr, "value": self.grpc_endpoint})
            try:
                resp = await self.ctl.namesrv_client.invoke(addr, cmd, 3.0)
                if resp.code != ResponseCode.SUCCESS:
                    log.warning("namesrv %s refused the gRPC endpoint (code %d): %s", addr, resp.code, resp.remark)
            except (ConnectionError, TimeoutError) as exc:
                log.warning("cannot publish the gRPC endpoint to namesrv %s: %s", addr, exc)

    async def withdraw(self) -> None:
        for addr in self.ctl.namesrv_addrs:
            cmd = RemotingCommand.request(RequestCode.DELETE_KV_CONFIG,
                                          {"namespace": KV_NAMESPACE, "key": self.ctl.broker_addr})
            try:
                await self.ctl.namesrv_client.invoke(addr, cmd, 3.0)
            except (ConnectionError, TimeoutError) as exc:
                log.warning("cannot withdraw the gRPC endpoint from namesrv %s: %s", addr, exc)

    # ------------------------------------------------------------------ lookups
    async def _namesrv(self, cmd: RemotingCommand) -> RemotingCommand | None:
        for addr in self.ctl.namesrv_addrs:
            try:
                return await self.ctl.namesrv_client.invoke(addr, cmd, 3.0)
            except (ConnectionError, TimeoutError) as exc:
                log.info("namesrv %s: %s", addr, exc)
        return None

    async def grpc_endpoints(self) -> dict[str, str]:
        """Broker address -> gRPC endpoint, from the name servers' KV table (cached for 2 s)."""
        at, table = self._kv
        if time.monotonic() - at < _CACHE_S:
            return table
        resp = await self._namesrv(RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                                           {"namespace": KV_NAMESPACE}))
        table = {}
        if resp is not None and resp.code == ResponseCode.SUCCESS and resp.body:
            doc = loads_fastjson(resp.body)
            table = {str(k): str(v) for k, v in items(doc.get("table") or {})}
        self._kv = (time.monotonic(), table)
        return table

    def _local(self, topic: str) -> list[BrokerQueues]:
        cfg = self.ctl.topics.get(topic)
        if cfg is None:
            return []
        return [BrokerQueues(self.ctl.config.broker_name, "", cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm)]

    async def brokers(self, topic: str) -> list[BrokerQueues]:
        """Every master serving ``topic`` over gRPC (this broker's endpoint as ""), by broker name."""
        if not self.ctl.namesrv_addrs:
            return self._local(topic)
        resp = await self._namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if resp is None or resp.code != ResponseCode.SUCCESS or not resp.body:
            return self._local(topic)
        route = loads_fastjson(resp.body)
        masters: dict[str, str] = {}
        for bd in route.get("brokerDatas") or []:
            for broker_id, addr in items(bd.get("brokerAddrs") or {}):
                if int(broker_id) == 0:
                    masters[str(bd["brokerName"])] = str(addr)
        grpc_of = await self.grpc_endpoints()
        out = []
        for qd in route.get("queueDatas") or []:
            name = str(qd["brokerName"])
            addr = masters.get(name)
            if addr is None:
                continue
            if name == self.ctl.config.broker_name and addr == self.ctl.broker_addr:
                endpoint = ""
            elif addr in grpc_of:
                endpoint = grpc_of[addr]
            else:
                continue  # that broker does not serve gRPC
            out.append(BrokerQueues(name, endpoint, int(qd["readQueueNums"]), int(qd["writeQueueNums"]),
                                    int(qd["perm"])))
        if not any(b.endpoint == "" for b in out) and self._serves_writes():
            out.extend(self._local(topic))  # registered with the name servers in a moment
        return sorted(out, key=lambda b: b.name)

    def _serves_writes(self) -> bool:
        """A master: a slave (or a fenced broker in controller mode) is never its group's queues in a route."""
        return not self.ctl.ha.is_slave  # (fenced counts as a slave)

    def _broker(self, b: BrokerQueues, request_endpoints: Any, access_point: bool = False) -> Any:
        """``access_point``: in controller mode, this broker's group's queues carry the several addresses the
        client dialled (every member's), as the proxy's cluster mode answers its own addresses: the client's
        channel then moves to a live member when one dies, and a slave forwards sends (:mod:`.forward`)."""
        broker = pb.Broker(name=b.name, id=0)
        if (access_point and request_endpoints is not None and len(request_endpoints.addresses) > 1
                and self.ctl.replicas is not None and b.name == self.ctl.config.broker_name):
            broker.endpoints.CopyFrom(request_endpoints)
        elif b.endpoint:
            broker.endpoints.CopyFrom(endpoints(b.endpoint))
        elif request_endpoints is not None and len(request_endpoints.addresses) == 1:
            broker.endpoints.CopyFrom(request_endpoints)  # the one address the client dialled is this broker
        else:
            broker.endpoints.CopyFrom(endpoints(self.grpc_endpoint))
        return broker

    async def message_queues(self, topic: str, request_endpoints: Any) -> list[Any]:
        """QueryRoute's queues: each queue id of each broker with its permission (RocketMQ's read/write queue
        split), accepting every message type (a topic of ours has no type: MIXED, as the proxy says)."""
        out = []
        for b in await self.brokers(topic):
            broker = self._broker(b, request_endpoints, access_point=True)
            for qid in range(max(b.read, b.write)):
                perm = b.perm & ~(0 if qid < b.read else PERM_READ) & ~(0 if qid < b.write else PERM_WRITE)
                out.append(pb.MessageQueue(topic=pb.Resource(name=topic), id=qid, permission=permission(perm),
                                           broker=broker, accept_message_types=ALL_TYPES))
        return out

    async def assignments(self, topic: str, request_endpoints: Any) -> list[Any]:
        """QueryAssignment: one queue per readable broker with id -1 ("any queue of this broker", as the
        proxy's POP mode): every consumer of a group receives from every broker, and the receive/ack state
        (FIFO included) decides who gets which message."""
        out = []
        for b in await self.brokers(topic):
            if b.perm & PERM_READ and b.read > 0:
                out.append(pb.Assignment(message_queue=pb.MessageQueue(
                    topic=pb.Resource(name=topic), id=-1, permission=permission(b.perm),
                    broker=self._broker(b, request_endpoints), accept_message_types=ALL_TYPES)))
        return out
