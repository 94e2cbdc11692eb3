"""The broker's gRPC server: ``grpc.aio`` on the broker's own event loop, plaintext unless ``grpcTlsCertFile``
and ``grpcTlsKeyFile`` are set.

``grpc.max_receive_message_length`` is the store's ``maxMessageSize`` plus 1 MiB of room for the envelope (the
default 4 MiB refuses a 4 MiB body at the transport with RESOURCE_EXHAUSTED; a body past the limit gets the
application's MESSAGE_BODY_TOO_LARGE instead). Started by the controller after the remoting server (the
endpoint it publishes to the name servers names the remoting address), stopped before it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from broker_core.grpc.route import RouteService
from broker_core.grpc.service import MessagingService
from broker_core.grpc.stubs import service_pb2_grpc
from broker_core.grpc.timer import TimerService

if TYPE_CHECKING:
    from broker_core.config import GrpcConfig
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)


class GrpcServer:
    def __init__(self, ctl: Broker, config: GrpcConfig, timer: TimerService) -> None:
        self.ctl = ctl
        self.config = config
        self.timer = timer  # the broker's (the controller loads and runs it: remoting sends use it too)
        self.server: grpc.aio.Server | None = None
        self.routes: RouteService | None = None
        self.port = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, host: str, port: int) -> int:
        ctl = self.ctl
        limit = ctl.store.max_message_size + 1024 * 1024
        self.server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                               ("grpc.max_send_message_length", limit)])
        self.routes = RouteService(ctl, "")
        service_pb2_grpc.add_MessagingServiceServicer_to_server(MessagingService(ctl, self.routes, self.timer),
                                                                self.server)
        cfg = self.config
        if cfg.grpc_tls_cert_file or cfg.grpc_tls_key_file:
            creds = grpc.ssl_server_credentials([(Path(cfg.grpc_tls_key_file).read_bytes(),
                                                  Path(cfg.grpc_tls_cert_file).read_bytes())])
            self.port = self.server.add_secure_port(f"{host}:{port}", creds)
        else:
            self.port = self.server.add_insecure_port(f"{host}:{port}")
        await self.server.start()
        self.routes.grpc_endpoint = f"{ctl.config.broker_ip}:{self.port}"
        self._tasks = [asyncio.ensure_future(self._publish())]
        log.info("broker %s serves RocketMQ 5 gRPC on %s:%d (%s)", ctl.config.broker_name, host, self.port,
                 "TLS" if cfg.grpc_tls_cert_file else "plaintext")
        return self.port

    async def _publish(self) -> None:
        """Our gRPC endpoint in the name servers' KV config, refreshed with every registration period."""
        assert self.routes is not None
        while True:
            await self.routes.publish()
            await asyncio.sleep(self.ctl.config.register_name_server_period_ms / 1000)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.routes is not None:
            await self.routes.withdraw()
        if self.server is not None:
            await self.server.stop(grace=1.0)
