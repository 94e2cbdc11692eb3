"""What a broker's HA object shares in both modes (``broker.BrokerHA``, classic master/slave, and
``autoswitch.AutoSwitchBrokerHA``, controller mode): the HA listener every role runs, the address it registers,
and a slave's two services, its link to the master's HA port and ``SlaveSynchronize``'s metadata copy.

Each mode decides when its broker is a slave (classic: ``brokerRole`` at start; controller mode: the role the
controller gives) and makes the link (``replica.MasterLink``) that mode speaks; :meth:`BrokerHABase.start_slave`
and :meth:`BrokerHABase.stop_slave` start and stop both services together.

Crash behaviour: nothing is persisted here.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from broker_core.codec.wire import SERIALIZE_JSON
from broker_core.ha.replica import MasterLink
from broker_core.ha.slave_sync import SlaveSynchronize
from broker_core.ha.transfer import HAListener
from broker_core.remoting.client import RemotingClient

if TYPE_CHECKING:
    from broker_core.server.ports import HaHost

S = TypeVar("S", bound=HAListener[Any])
L = TypeVar("L", bound=MasterLink)


class BrokerHABase(Generic[S, L]):
    """One broker's HA pieces: ``service`` (its listener, type ``S``) and, while a slave, ``client`` (``L``)."""

    def __init__(self, ctl: HaHost, service: S) -> None:
        self.ctl = ctl
        self.config = ctl.config
        self.service = service
        self.client: L | None = None
        self.sync: SlaveSynchronize | None = None
        self._sync_client: RemotingClient | None = None
        self._sync_task: asyncio.Task[None] | None = None

    def master_ha_addr(self) -> str:
        raise NotImplementedError

    @property
    def server_addr(self) -> str:
        """``haServerAddr`` as registered: ``brokerIP2:haListenPort``."""
        if not self.service.port:
            return ""
        return f"{self.config.ha.broker_ip2 or self.config.broker_ip}:{self.service.port}"

    async def start_listener(self, host: str, listen_port: int) -> None:
        port = self.config.ha.ha_listen_port
        if port < 0:  # RocketMQ's listenPort + 1; a broker on an ephemeral port (listenPort 0) takes any free one
            port = listen_port + 1 if self.config.listen_port > 0 else 0
        await self.service.start(host, port)
        self.ctl.store.add_arrival_listener(lambda batch: self.service.notify())

    def start_slave(self, client: L) -> None:
        """Replicate through ``client`` and copy the master's metadata."""
        self.client = client
        client.start()
        self._sync_client = RemotingClient(serialize_type=SERIALIZE_JSON)
        self.sync = SlaveSynchronize(self.ctl, self._sync_client)
        self._sync_task = asyncio.ensure_future(self.sync.run())

    async def stop_slave(self) -> None:
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
        await self.stop_slave()
        await self.service.close()

    def slave_info(self) -> dict[str, object]:
        """The link's and the metadata copy's state, while this broker is a slave."""
        info: dict[str, object] = {}
        if self.client is not None:
            info.update(self.client.info())
        if self.sync is not None:
            info["haSlaveSyncRounds"] = self.sync.rounds
        return info
