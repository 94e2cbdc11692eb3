"""The message store: CommitLog, ConsumeQueues, IndexFiles, flush, recovery, retention.

Only :class:`~broker_core.store.message_store.MessageStore` is meant to be used from outside this package.
"""

from broker_core.store.message_store import MessageStore
from broker_core.store.results import GetStatus, PutStatus

__all__ = ["GetStatus", "MessageStore", "PutStatus"]
