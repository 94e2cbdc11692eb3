"""ControllerServer: a standalone controller's RemotingServer (on this node's ``controllerDLegerPeers`` port,
where RocketMQ's DLedger controller listens) with the controller handlers, and :func:`embed` for hosting the
same handlers on another server (the name server with ``enableControllerInNamesrv=true``)."""

from __future__ import annotations

import logging

from broker_core.controller.config import ControllerConfig
from broker_core.controller.manager import ControllerManager
from broker_core.controller.processor import controller_handlers
from broker_core.remoting.server import Connection, RemotingServer

log = logging.getLogger(__name__)


def embed(server: RemotingServer, manager: ControllerManager) -> None:
    """Serve the controller codes on ``server`` too, and tell the manager when a connection closes (a broker's
    heartbeat channel closing marks it inactive at once). Codes the server already serves stay its own."""
    for code, handler in controller_handlers(manager).items():
        server.handlers.setdefault(code, handler)
    previous = server.on_close

    def on_close(conn: Connection) -> None:
        if previous is not None:
            previous(conn)
        manager.on_channel_close(conn)
    server.on_close = on_close


def start_embedded(server: RemotingServer, config: ControllerConfig, bound_addr: str) -> ControllerManager:
    """Start a controller on ``server`` (listening at ``bound_addr``): the name server's
    ``enableControllerInNamesrv``. Without ``controllerDLegerPeers`` it is a group of one at ``bound_addr``."""
    if not config.controller_dleger_peers.strip():
        config.controller_dleger_self_id = config.controller_dleger_self_id or "n0"
        config.controller_dleger_peers = f"{config.controller_dleger_self_id}-{bound_addr}"
    manager = ControllerManager(config)
    embed(server, manager)
    manager.start()
    return manager


class ControllerServer:
    def __init__(self, config: ControllerConfig, idle_timeout: float = 120.0) -> None:
        self.manager = ControllerManager(config)
        self.remoting = RemotingServer("controller", {}, idle_timeout=idle_timeout)
        embed(self.remoting, self.manager)

    async def start(self, host: str | None = None, port: int | None = None) -> int:
        """Listen (default: this node's peer address) and start the Raft node; returns the bound port."""
        self_host, _, self_port = self.manager.config.self_addr().rpartition(":")
        bound = await self.remoting.start(host or self_host, int(self_port) if port is None else port)
        self.manager.start()
        log.info("controller %s of group %s listening on %s:%d", self.manager.config.controller_dleger_self_id,
                 self.manager.config.controller_dleger_group, host or self_host, bound)
        return bound

    async def close(self) -> None:
        await self.manager.close()
        await self.remoting.close()
