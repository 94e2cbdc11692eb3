"""Every mqadmin sub-command; importing this package registers them (in ``cli.COMMANDS``)."""

from broker_core.tools.mqadmin.commands import topics  # noqa: F401,I001  (the listing follows this order)
from broker_core.tools.mqadmin.commands import groups, messages, brokers, acl, controller  # noqa: F401
