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

from broker_core.ha.broker_base import BrokerHABase
from broker_core.ha.master import HAService
from broker_core.ha.slave import HAClient
from broker_core.store import PutStatus

if TYPE_CHECKING:
    from broker_core.server.ports import HaHost

log = logging.getLogger(__name__)

MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")


class BrokerHA(BrokerHABase[HAService, HAClient]):
    def __init__(self, ctl: HaHost) -> None:
        super().__init__(ctl, HAService(ctl.store, ctl.config.ha))

    @property
    def is_slave(self) -> bool:
        return self.config.broker_role == "SLAVE"

    @property
    def sync_master(self) -> bool:
        return self.config.broker_role == "SYNC_MASTER"

    def put_refusal(self) -> str | None:
        """Controller mode's minInSyncReplicas refusal (ha/autoswitch.py); a master/slave pair never refuses."""
        return None

    def master_ha_addr(self) -> str:
        return self.config.ha.ha_master_address or self.ctl.master_ha_addr

    async def start(self, host: str, listen_port: int) -> None:
        await self.start_listener(host, listen_port)
        if self.is_slave:
            self.start_slave(HAClient(self.ctl.store, self.config.ha, self.master_ha_addr))

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
        await self.stop_slave()
        await asyncio.get_running_loop().run_in_executor(None, self.ctl.store.promote, role)
        self.config.broker_id = 0
        log.warning("broker %s promoted to %s (brokerId 0) by an admin request", self.config.broker_name, role)

    def runtime_info(self) -> dict[str, object]:
        return {"haServerAddr": self.server_addr, **self.service.info(), **self.slave_info()}
