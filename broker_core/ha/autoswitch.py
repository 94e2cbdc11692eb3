"""AutoSwitchBrokerHA: the HA pieces of a broker in controller mode (``enableControllerMode=true``), behind the
calls ``BrokerController`` makes of ``BrokerHA`` (``is_slave``, ``sync_master``, ``wait_replicated``, ...), plus
the role changes the ReplicasManager drives (reference ``rocketmq-controller.md`` §3.5, §4.2).

State: ``fenced`` (the start, until the controller gave a role) or a role, MASTER or SLAVE, with the master
epoch it was given. While fenced or a slave, the store refuses puts (``MessageStore.set_writable``), so every
write path (remoting, the send lane, gRPC, delayed delivery) answers SERVICE_NOT_AVAILABLE.

To master (§4.2): close the HA client; dispatch everything received; drop epoch entries at or after the new
epoch and append ``(epoch, maxPhyOffset)``; adopt the SSS; open the store. To slave: close the store for puts,
close every slave connection (their waiting puts fail), start the HA client towards the new master.

Invariants:
1. A role change applies only with a master epoch above the local one (the ReplicasManager checks), so an old
   notification never undoes a newer one.
2. The store is writable only while this broker is the master of the newest epoch it knows of; it is closed
   before the HA client starts, so no local put lands among replicated bytes.
3. The epoch entry of an epoch is written before the first put of that epoch.

Crash behaviour: the role is not persisted; a restarted broker starts fenced and asks the controller again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

from broker_core.ha.autoswitch_master import AutoSwitchHAService
from broker_core.ha.autoswitch_slave import AutoSwitchHAClient
from broker_core.ha.broker_base import BrokerHABase
from broker_core.store import PutStatus
from broker_core.store.epoch_file import LONG_MAX, EpochFile

if TYPE_CHECKING:
    from broker_core.server.ports import HaHost

log = logging.getLogger(__name__)


class AutoSwitchBrokerHA(BrokerHABase[AutoSwitchHAService, AutoSwitchHAClient]):
    def __init__(self, ctl: HaHost) -> None:
        self.epochs = EpochFile(ctl.config.epoch_file_path)
        super().__init__(ctl, AutoSwitchHAService(ctl.store, ctl.config, self.epochs))
        self.fenced = True
        self.master_epoch = 0  # the newest master epoch this broker applied
        self.master_address = ""  # the master's broker address as the controller announced it
        self.controller_id = -1  # this broker's id at the controller
        self._role_lock = asyncio.Lock()
        ctl.store.set_writable(False)
        ctl.store.set_dispatch_limit(self._dispatch_limit)  # consumers read only confirmed messages (§5)

    def _dispatch_limit(self) -> int:
        """RocketMQ's ``readUnCommitted=false``: a master dispatches up to its confirm offset, a slave up to the
        one its master sent; a fenced broker (start-up, before a role) keeps what recovery dispatched."""
        if self.fenced:
            return LONG_MAX
        if self.service.is_master:
            return self.service.confirm()
        client = self.client
        return max(client.confirm_offset, 0) if client is not None else LONG_MAX

    # ------------------------------------------------------------------ BrokerHA's interface
    @property
    def is_master(self) -> bool:
        return self.service.is_master and not self.fenced

    @property
    def is_slave(self) -> bool:
        """True while puts must be refused: fenced, or a slave."""
        return not self.is_master

    @property
    def sync_master(self) -> bool:
        return self.is_master

    def master_ha_addr(self) -> str:
        """The master's HA address: the name server's answer, only while it names the announced master."""
        if self.config.ha.ha_master_address:
            return self.config.ha.ha_master_address
        if self.master_address and self.ctl.master_addr == self.master_address:
            return self.ctl.master_ha_addr
        return ""

    async def start(self, host: str, listen_port: int) -> None:
        await self.start_listener(host, listen_port)

    async def wait_replicated(self, next_offset: int) -> PutStatus:
        return await self.service.wait_acked(next_offset)

    async def promote(self, role: str) -> None:
        raise ValueError("in controller mode the controllers choose the master: use CONTROLLER_ELECT_MASTER "
                         "(1002) with designateElect, not brokerRole")

    def put_refusal(self) -> str | None:
        """§5: the remark of a put refused before storing (SYSTEM_ERROR), else None."""
        if self.is_master and self.service.in_sync_replicas() < self.config.controller.min_in_sync_replicas:
            return "in-sync replicas not enough"
        return None

    # ------------------------------------------------------------------ role changes
    async def change_to_master(self, broker_id: int, epoch: int, sync_state_set: set[int], sss_epoch: int) -> None:
        async with self._role_lock:
            store = self.ctl.store
            last = self.epochs.last_epoch()
            if epoch < last:
                log.error("refusing to become master of epoch %d: the epoch file is at %d", epoch, last)
                return
            await self.stop_slave()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, store.reput.do_reput)
            end = store.max_phy_offset()
            self.epochs.truncate_suffix_from_offset(end + 1)  # entries past the data (§4.2 step 2)
            self.epochs.truncate_suffix_from_epoch(epoch)
            if not self.epochs.append_after_empty(epoch, end):  # an epoch that wrote nothing gives way
                log.error("cannot append epoch %d at %d to %s", epoch, end, self.epochs.entries())
                return
            self.service.local_broker_id = broker_id
            self.service.sync_state_set = set()
            self.service.sync_state_set_epoch = 0
            self.service.pending_set = None
            self.service.set_sync_state_set(set(sync_state_set) | {broker_id}, sss_epoch)
            self.service.is_master = True
            self.service.confirm_offset = end
            await loop.run_in_executor(None, store.open_as_master)
            self.master_epoch = epoch
            self.master_address = self.ctl.broker_addr
            self.controller_id = broker_id
            self.config.broker_id = 0
            self.config.broker_role = "SYNC_MASTER"
            self.fenced = False
            log.warning("broker %s is MASTER of epoch %d from offset %d (SyncStateSet %s)", self.config.broker_name,
                        epoch, end, sorted(self.service.sync_state_set))

    async def change_to_slave(self, broker_id: int, epoch: int, master_address: str) -> None:
        async with self._role_lock:
            self.ctl.store.set_writable(False)
            was_master = self.service.is_master
            self.service.is_master = False
            self.service.close_connections()
            self.service.fail_waiters()
            self.master_epoch = epoch
            self.controller_id = broker_id
            self.config.broker_id = broker_id
            self.config.broker_role = "SLAVE"
            self.fenced = False
            changed = master_address != self.master_address
            self.master_address = master_address
            if self.client is None or changed or was_master:
                await self.stop_slave()
                self.start_slave(AutoSwitchHAClient(self.ctl.store, self.config, self.epochs, broker_id,
                                                    self.master_ha_addr, lambda: self.master_epoch))
            log.warning("broker %s is SLAVE (id %d) of %s, epoch %d", self.config.broker_name, broker_id,
                        master_address, epoch)

    def runtime_info(self) -> dict[str, object]:
        info: dict[str, object] = {"haServerAddr": self.server_addr, "controllerMode": True,
                                   "fenced": self.fenced, "masterEpoch": self.master_epoch,
                                   "controllerBrokerId": self.controller_id,
                                   "epochEntries": json.dumps([[e.epoch, e.start_offset]
                                                               for e in self.epochs.entries()])}
        service = self.service.info()
        service["haSlaves"] = json.dumps(service["haSlaves"], separators=(",", ":"))
        service["syncStateSet"] = json.dumps(service["syncStateSet"])
        info.update(service)
        info.update(self.slave_info())
        return info
