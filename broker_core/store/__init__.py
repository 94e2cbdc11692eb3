"""The message store: CommitLog, ConsumeQueues, IndexFiles, flush, recovery, retention.

Its outside API is this package: :class:`MessageStore` and the value types and helpers its callers need. The
broker's request processors import from here only, never from the submodules (an import-linter contract).
"""

from broker_core.store.clock import SYSTEM_CLOCK, Clock, ManualClock, OffsetClock
from broker_core.store.disk_guard import file_disk_probe
from broker_core.store.flush import GroupCommitRequest
from broker_core.store.message import MessageInner
from broker_core.store.message_store import MAX_TIMESTAMP, MessageStore
from broker_core.store.replica import ReplicaError, split_whole_records
from broker_core.store.results import BatchPutResult, GetMessageResult, GetStatus, PutMessageResult, PutStatus
from broker_core.store.schedule import DeliveryReport
from broker_core.store.snapshot import DEFAULT_TTL_MS, SegmentSnapshots

__all__ = [
           "DEFAULT_TTL_MS",
           "MAX_TIMESTAMP",
           "SYSTEM_CLOCK",
           "BatchPutResult",
           "Clock",
           "DeliveryReport",
           "GetMessageResult",
           "GetStatus",
           "GroupCommitRequest",
           "ManualClock",
           "MessageInner",
           "MessageStore",
           "OffsetClock",
           "PutMessageResult",
           "PutStatus",
           "ReplicaError",
           "SegmentSnapshots",
           "file_disk_probe",
           "split_whole_records",
]
