"""Master/slave replication of the CommitLog, RocketMQ's HA protocol (reference §8).

- ``wire``: the two byte layouts (the slave's 8-byte offset report, the master's 12-byte transfer header).
- ``master``: ``HAService``, the master's listener, one ``HAConnection`` per slave, and the SYNC_MASTER wait
  on the slaves' acknowledged offset (upstream ``GroupTransferService``).
- ``slave``: ``HAClient``, the slave's connection to its master, appending what it receives to the store.
- ``slave_sync``: ``SlaveSynchronize``, a slave's periodic copy of its master's topics, offsets and groups.
- ``broker``: ``BrokerHA``, what the broker controller starts, stops and asks (one object per role).

Controller mode's autoswitch HA (``autoswitch*.py``) speaks RocketMQ 5's stream; both flavours run on the same
loops: ``transfer`` (the master's listener and per-slave connection), ``replica`` (the slave's link to its
master and whole-record append) and ``broker_base`` (what a broker's HA object starts, stops and reports).

The store is used through ``broker_core.store`` only (``MessageStore.append_replicated`` and friends).
"""

from broker_core.ha.broker import BrokerHA

__all__ = ["BrokerHA"]
