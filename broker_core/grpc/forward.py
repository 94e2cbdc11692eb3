"""SendMessage forwarded by a slave to its master in controller mode (what RocketMQ's proxy does in cluster mode).

A RocketMQ 5 client given every broker's gRPC endpoint as its access point (``"h1:8081;h2:8081;h3:8081"``) keeps
one channel to whichever of them answers; QueryRoute gives it that same access point for its group's queues (see
:mod:`broker_core.grpc.route`), so after the master dies the channel moves to a live broker at once, with no
route refresh. A broker that is not the master (a slave, or fenced) forwards such a send, unchanged, to the gRPC
endpoint of the master the controller announced (the name servers' KV table maps its broker address to it) and
answers what the master answered. Never forwarded: a request already forwarded (metadata
:data:`FORWARDED_KEY`: one hop at most, so two brokers that each take the other for master cannot loop),
transaction messages (their EndTransaction would come back to this broker), brokers outside controller mode or
serving gRPC over TLS. When the master is unknown or unreachable the broker refuses as before (the client
retries).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import grpc

from broker_core.grpc.stubs import pb, service_pb2_grpc

if TYPE_CHECKING:
    from broker_core.grpc.route import RouteService
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

FORWARDED_KEY = "x-broker-core-forwarded"
_PASSED = ("authorization", "x-mq-date-time", "x-mq-client-id", "x-mq-request-id", "x-mq-language",
           "x-mq-client-version", "x-mq-protocol", "x-mq-namespace", "x-mq-session-token")


class SendForwarder:
    def __init__(self, ctl: Broker, routes: RouteService) -> None:
        self.ctl = ctl
        self.routes = routes
        self._channels: dict[str, Any] = {}  # gRPC endpoint -> grpc.aio channel

    def _master(self) -> str:
        """The master's broker address when this broker should forward, else ""."""
        ctl = self.ctl
        if ctl.replicas is None or not ctl.ha.is_slave or ctl.config.grpc.grpc_tls_cert_file:
            return ""
        master = str(getattr(ctl.ha, "master_address", "") or "")
        return "" if master == ctl.broker_addr else master

    async def forward(self, request: Any, context: Any) -> Any | None:
        """The master's SendMessageResponse for ``request``, or None when this broker answers itself."""
        master = self._master()
        if not master or any(m.system_properties.message_type == pb.TRANSACTION for m in request.messages):
            return None
        metadata = dict(context.invocation_metadata() or ())
        if FORWARDED_KEY in metadata:
            return None
        endpoint = (await self.routes.grpc_endpoints()).get(master)
        if not endpoint:
            return None
        channel = self._channels.get(endpoint)
        if channel is None:
            limit = self.ctl.store.max_message_size + 1024 * 1024
            channel = self._channels[endpoint] = grpc.aio.insecure_channel(
                endpoint, options=[("grpc.max_send_message_length", limit),
                                   ("grpc.max_receive_message_length", limit)])
        passed = [(k, v) for k, v in metadata.items() if k in _PASSED] + [(FORWARDED_KEY, self.ctl.broker_addr)]
        try:
            return await service_pb2_grpc.MessagingServiceStub(channel).SendMessage(request, metadata=passed,
                                                                                   timeout=10.0)
        except grpc.aio.AioRpcError as exc:
            log.info("cannot forward a send to the master %s (%s): %s", master, endpoint, exc.code())
            return None

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
