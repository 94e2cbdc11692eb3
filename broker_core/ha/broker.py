"""BrokerHA: the HA pieces one broker runs, by role, behind the few calls the controller makes.

- every role listens for slaves (``HAService``), as upstream, so a promoted slave serves its own slaves;
- a SLAVE also runs ``HAClient`` (to ``haMasterAddress``, else the ``haServerAddr`` the name server answered
  its registration with) and ``SlaveSynchronize``;
- a SYNC_MASTER's sends wait in :meth:`wait_replicated`.

Promotion (:meth:`promote`) is by hand only, as upstream has none: stop replicating, make the store
writable, take the new role; the next registration tells the name server (see README "Master and slaves").
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.ha.master import HAService
from broker_core.ha.slave import HAClient
from broker_core.ha.slave_sync import SlaveSynchronize
from broker_core.remoting.client import RemotingClient
from broker_core.store import PutStatus

if TYPE_CHECKING:
    from broker_core.server.ports import HaHost

log = logging.getLogger(__name__)

MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")


class BrokerHA:
    def __init__(self, ctl: HaHost) -> None:
        self.ctl = ctl
        self.config = ctl.config
        self.service = HAService(ctl.store, ctl.config.ha)
        self.client: HAClient | None = None
        self.sync: SlaveSynchronize | None = None
        self._sync_client: RemotingClient | None = None
        self._sync_task: asyncio.Task[None] | None = None

    @property
    def is_slave(self) -> bool:
        return self.config.broker_role == "SLAVE"

    @property
    def sync_master(self) -> bool:
        return self.config.broker_role == "SYNC_MASTER"

    def put_refusal(self) -> str | None:
        """Controller mode's minInSyncReplicas refusal (ha/autoswitch.py); a master/slave pair never refuses."""
        return None

    @property
    def server_addr(self) -> str:
        """``haServerAddr`` as registered: ``brokerIP2:haListenPort``."""
        if not self.service.port:
            return ""
        return f"{self.config.ha.broker_ip2 or self.config.broker_ip}:{self.service.port}"

    def master_ha_addr(self) -> str:
        return self.config.ha.ha_master_address or self.ctl.master_ha_addr

    async def start(self, host: str, listen_port: int) -> None:
        port = self.config.ha.ha_listen_port
        if port < 0:  # RocketMQ's listenPort + 1; a broker on an ephemeral port (listenPort 0) takes any free one
            port = listen_port + 1 if self.config.listen_port > 0 else 0
        await self.service.start(host, port)
        self.ctl.store.add_arrival_listener(lambda batch: self.service.notify())
        if self.is_slave:
            self._start_slave()

    def _start_slave(self) -> None:
        self.client = HAClient(self.ctl.store, self.config.ha, self.master_ha_addr)
        self.client.start()
        self._sync_client = RemotingClient(serialize_type=SERIALIZE_JSON)
        self.sync = SlaveSynchronize(self.ctl, self._sync_client)
        self._sync_task = asyncio.ensure_future(self.sync.run())

    async def _stop_slave(self) -> None:
        if self._sync_task is not None:
            self._sync_task.cancel()
            await asyncio.gather(self._sync_task, return_exceptions=True)
            self._sync_task = None
        if self.client is not None:
            await self.client.close()
            self.client = None
        if self._sync_client is not None:
            await self._sync_client.close()
            self._sync_client = None

    def master_address_learned(self, before: str) -> None:
        """After a registration: a slave whose master's HA address changed reconnects at once."""
        if self.client is not None and self.master_ha_addr() != before:
            self.client.address_changed()

    async def shutdown(self) -> None:
        await self._stop_slave()
        await self.service.close()

    async def wait_replicated(self, next_offset: int) -> PutStatus:
        """SYNC_MASTER: PUT_OK once a slave holds the CommitLog up to ``next_offset``, else FLUSH_SLAVE_TIMEOUT
        or SLAVE_NOT_AVAILABLE (upstream ``CommitLog.submitReplicaRequest``)."""
        return await self.service.wait_replicated(next_offset)

    async def promote(self, role: str) -> None:
        """A slave becomes a master by hand: replication stops, what it received is dispatched, puts open.
        Also set ``brokerId=0`` and ``brokerRole`` in its broker.conf before its next restart (README)."""
        if role not in MASTER_ROLES:
            raise ValueError(f"promote to ASYNC_MASTER or SYNC_MASTER, not {role!r}")
        if not self.is_slave:
            raise ValueError(f"this broker is already {self.config.broker_role}")
        await self._stop_slave()
        await asyncio.get_running_loop().run_in_executor(None, self.ctl.store.promote, role)
        self.config.broker_id = 0
        log.warning("broker %s promoted to %s (brokerId 0) by an admin request", self.config.broker_name, role)

    def runtime_info(self) -> dict[str, object]:
        info: dict[str, object] = {"haServerAddr": self.server_addr, **self.service.info()}
        if self.client is not None:
            info.update(self.client.info())
        if self.sync is not None:
            info["haSlaveSyncRounds"] = self.sync.rounds
        return info
