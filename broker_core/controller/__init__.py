"""RocketMQ 5 controller mode, the controller side (reference ``rocketmq-controller.md``): per broker-set it
keeps the master, the epochs and the SyncStateSet, replicated among the controllers with pysyncobj's Raft, and
elects a new master when the old one stops heartbeating.

Modules: ``config`` (keys), ``events`` (the log's entries), ``replicas`` (the state machine and its request
checks), ``elect`` (DefaultElectPolicy), ``heartbeat`` (who is alive, per controller), ``raft`` (pysyncobj),
``manager`` (one node: scheduling, scans, notifications), ``processor`` (remoting handlers), ``server``
(standalone server / embedding in the name server), ``__main__`` (``python -m broker_core.controller``).

Not to be confused with ``broker_core.server.controller`` (the broker's BrokerController).
"""
