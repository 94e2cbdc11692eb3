"""``mqadmin``: Apache RocketMQ's admin command line (sub-command names, options, output layouts of 4.9's
``tools``), speaking only the remoting protocol through the SDK's AdminClient, so it works against any broker and
name server that speak it.

    mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t orders
    python -m broker_core.tools.mqadmin help consumerProgress
"""

from broker_core.tools.mqadmin.cli import main

__all__ = ["main"]
