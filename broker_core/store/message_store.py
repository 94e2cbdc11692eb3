"""MessageStore: the one store API the broker server calls (upstream ``DefaultMessageStore``).

Start-up order (INVENTORY §12.2): take the ``lock`` file, note whether ``abort`` exists (abnormal
exit), create ``abort``, load the CommitLog, the ConsumeQueues, the checkpoint and the IndexFiles,
recover, replay dispatch up to the CommitLog end, rebuild the topic-queue table, then start the
background services (dispatcher, flush, pre-allocation, cleaner). ``shutdown`` stops them, flushes
everything, writes the checkpoint, removes ``abort`` and releases the lock.

Invariants:
1. Only one process opens a store directory (``flock`` on ``lock``); a second gets StoreLockedError.
2. While ``disk_full`` is set, puts return ``SERVICE_NOT_AVAILABLE`` and write nothing; once a flush has
   failed (``flush_failure``), puts return ``FLUSH_DISK_FAILED`` and write nothing (``flush.py``).
3. Pulls read ConsumeQueues, so a message is visible only after dispatch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from broker_core.codec import CodecError
from broker_core.codec.batch_append import check_batch
from broker_core.codec.consume_queue import BLANK_UNIT_SIZE
from broker_core.codec.message import MAX_TOPIC_BYTES, ZERO_HOST, MessageRecord
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.config import BrokerConfig
from broker_core.store import consume_queue, recovery
from broker_core.store.allocate import AllocateMappedFileService
from broker_core.store.checkpoint import StoreCheckpoint
from broker_core.store.clock import SYSTEM_CLOCK, Clock
from broker_core.store.commit_log import CommitLog
from broker_core.store.consume_queue import ConsumeQueue, remove_empty_topic_dir
from broker_core.store.dir_lock import DirectoryLock
from broker_core.store.disk_guard import DiskCheck, DiskGuard, DiskProbe
from broker_core.store.dispatcher import ArrivalListener, ReputMessageService
from broker_core.store.durability import FlushFailure
from broker_core.store.errors import StoreError
from broker_core.store.flush import (
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitRequest,
    GroupCommitService,
    flush_commit_log,
)
from broker_core.store.index_file import IndexService
from broker_core.store.message import MessageInner
from broker_core.store.queue_reader import in_disk, offset_by_time, query_by_key, read_queue
from broker_core.store.replica import ReplicationMixin
from broker_core.store.results import (
    BatchPutResult,
    GetMessageResult,
    GetStatus,
    PutMessageResult,
    PutStatus,
    QueryMessageResult,
    batch_end,
)
from broker_core.store.retention import CleanCommitLogService, RetentionReport
from broker_core.store.schedule import DeliveryReport, ScheduleMessageService
from broker_core.store.snapshot import SNAPSHOTS_DIR, SegmentSnapshots

log = logging.getLogger(__name__)

MAX_TIMESTAMP = (1 << 63) - 1
SLAVE_REFUSAL = "message store is slave mode, so putMessage is forbidden"


class MessageStore(ReplicationMixin):
    """The facade; a slave's replicated appends and promotion are :class:`ReplicationMixin`'s (replica.py)."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK, disk_probe: DiskProbe | None = None, *,
                 background: bool = True) -> None:
        """``background=False`` runs no threads: dispatch, flush and cleaning happen only when called
        (``dispatch()``, ``flush()``, ``clean_expired_files()``); used by tools and deterministic tests."""
        self.config = config.validate()
        self.store_config = files = config.store
        self.clock = clock
        self.background = background
        self.allocator = AllocateMappedFileService(files.warm_mapped_file_enable) if background else None
        self.commit_log = CommitLog(files, (config.broker_ip, config.listen_port), clock, self.allocator)
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self._cq_lock = threading.Lock()
        self.index_service = (
            IndexService(files.index_dir, files.max_hash_slot_num, files.max_index_num, clock.now_ms)
            if files.message_index_enable else None)
        self.checkpoint: StoreCheckpoint  # opened by start() (_load_and_recover), before anything reads it
        self.reput = ReputMessageService(self)
        self.sync_flush = config.flush.sync_flush
        self.flush_service: FlushRealTimeService | GroupCommitService = (
            GroupCommitService(self) if self.sync_flush else FlushRealTimeService(self, config.flush))
        self.flush_cq_service = FlushConsumeQueueService(self, config.flush)
        self.disk_guard = DiskGuard(config.retention, files.commit_log_dir, disk_probe)
        self.commit_log.on_no_space = self.disk_guard.no_space  # no blocks ahead of the writer: refuse puts
        self.clean_service = CleanCommitLogService(self, config.retention, self.disk_guard)
        self.schedule = ScheduleMessageService(self, config.timer, files.config_dir, config.broker_ip)
        self._writable_role = config.broker_role != "SLAVE"
        self.flush_failure = FlushFailure()
        self.quarantined: list[str] = []  # quarantine folders recovery filled at this start (quarantine.py)
        self.last_exit_ok = True
        self.running = False
        self._dir_lock = DirectoryLock(files.lock_path, files.store_path_root_dir)
        self._clean_timer: threading.Thread | None = None
        self._stop = threading.Event()

    # ================================================================== lifecycle
    def start(self) -> MessageStore:
        cfg = self.store_config
        root = cfg.store_path_root_dir
        os.makedirs(root, exist_ok=True)
        self._dir_lock.acquire()
        try:
            self.last_exit_ok = not cfg.abort_path.exists()
            cfg.abort_path.parent.mkdir(parents=True, exist_ok=True)
            cfg.abort_path.touch()
            recovery.load_and_recover(self)
        except BaseException:
            self._dir_lock.release()
            raise
        self.running = True
        if self.allocator is not None and self.commit_log.mapped_file_queue.last() is None:
            # An empty store: prepare the first segment before accepting puts (a sparse file; with
            # warmMapedFileEnable written whole, about a second per GiB), rather than stalling the first put
            # (and a server's event loop) with it.
            self.allocator.prepare(cfg.commit_log_dir / f"{0:020d}", cfg.mapped_file_size_commit_log_bytes)
            self.allocator.wait_idle()
        if self.background:
            self.reput.start()
            self.flush_service.start()
            self.flush_cq_service.start()
            if self.config.retention.clean_resource_interval_ms > 0:
                self._clean_timer = threading.Thread(target=self._clean_loop, name="clean-files", daemon=True)
                self._clean_timer.start()
        log.info("store %s started (last exit %s), CommitLog [%d, %d)", root,
                 "clean" if self.last_exit_ok else "ABNORMAL", self.commit_log.min_offset(),
                 self.commit_log.max_offset())
        return self

    def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop.set()
        if self._clean_timer is not None:
            self._clean_timer.join()
        if self.background:
            self.reput.shutdown()
            self.flush_service.shutdown()
            self.flush_cq_service.shutdown()
            if self.allocator is not None:
                self.allocator.shutdown()
        else:
            self.reput.do_reput()
            self.flush()
        self.commit_log.close()
        for cq in self.consume_queues():
            cq.close()
        if self.index_service is not None:
            self.index_service.close()
        failed = self.flush_failure.failed
        self.checkpoint.close(write=not failed)
        self.schedule.persist()
        if failed:  # keep ``abort``: the next start verifies the CommitLog from the last good checkpoint
            log.error("store %s shut down after a failed flush; the next start recovers it as after a crash",
                      self.store_config.store_path_root_dir)
        else:
            self.store_config.abort_path.unlink(missing_ok=True)
        self._dir_lock.release()
        if not failed:
            log.info("store %s shut down cleanly", self.store_config.store_path_root_dir)

    def __enter__(self) -> MessageStore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ================================================================== put
    def _refuse(self, n: int) -> list[PutMessageResult] | None:
        if not self.running:
            return [PutMessageResult(PutStatus.SERVICE_NOT_AVAILABLE, error="store is not running")] * n
        if not self._writable_role:  # RocketMQ: "message store is slave mode, so putMessage is forbidden"
            return [PutMessageResult(PutStatus.SERVICE_NOT_AVAILABLE, error=SLAVE_REFUSAL)] * n
        if self.disk_guard.full:
            return [PutMessageResult(PutStatus.SERVICE_NOT_AVAILABLE,
                                     error="disk full: writes are refused until disk use drops")] * n
        if self.flush_failure.error:
            return [PutMessageResult(PutStatus.FLUSH_DISK_FAILED, error=self.flush_failure.error)] * n
        return None

    def put_messages_nowait(self, msgs: list[MessageInner]) -> tuple[list[PutMessageResult], GroupCommitRequest | None]:
        """Append without waiting for the flush. Under SYNC_FLUSH the request tells when the batch is
        durable (``request.wait(timeout)``, or ``await request.future()`` on an event loop)."""
        refused = self._refuse(len(msgs))
        if refused is not None:
            return refused, None
        for msg in msgs:
            if msg.delay_level:
                self.schedule.transform(msg)
        results = self.commit_log.put_messages(msgs) if len(msgs) != 1 else [self.commit_log.put_message(msgs[0])]
        if not self.sync_flush:
            # ASYNC_FLUSH: the flusher runs on its interval (upstream wakes it per put: here a thread switch each)
            return results, None
        end = batch_end(results)
        if end < 0:
            return results, None
        return results, self._flush_request(end)

    def put_batch_nowait(self, topic: str, queue_id: int, body: bytes, extra: bytes, *, sys_flag: int = 0,
                         born_timestamp: int = 0, born_host: bytes = ZERO_HOST, born_port: int = 0,
                         reconsume_times: int = 0) -> tuple[BatchPutResult, GroupCommitRequest | None]:
        """A SEND_BATCH_MESSAGE body stored as it came, with ``extra`` (encoded) appended to each entry's
        properties: all of it, or nothing when an entry breaks a limit. Flush as :meth:`put_messages_nowait`."""
        refused = self._refuse(1)
        topic_bytes = topic.encode()
        if refused is not None:
            return BatchPutResult(refused[0].status, error=refused[0].error), None
        if not 0 < len(topic_bytes) <= MAX_TOPIC_BYTES or not 0 <= queue_id < 1 << 31:
            return BatchPutResult(PutStatus.MESSAGE_ILLEGAL, error=f"bad topic or queue {topic!r}/{queue_id}"), None
        commit_log = self.commit_log
        bad = check_batch(body, len(extra), len(topic_bytes), commit_log.max_message_size,
                          commit_log.mapped_file_size)
        if bad is not None:
            return BatchPutResult(PutStatus[bad[1]], error=f"message {bad[0]} of the batch: {bad[2]}"), None
        result = commit_log.put_batch(topic, topic_bytes, queue_id, body, extra, sys_flag, born_timestamp,
                                      born_host, born_port, reconsume_times)
        if not self.sync_flush or not result.phys:
            return result, None
        return result, self._flush_request(result.end_offset)

    def _flush_request(self, end: int) -> GroupCommitRequest | None:
        """SYNC_FLUSH: the group commit covering the CommitLog up to ``end`` (without threads: flushed here)."""
        if self.background and isinstance(self.flush_service, GroupCommitService):
            return self.flush_service.put_request(end)
        self.flush()
        if self.commit_log.flushed_where >= end:
            return None
        failed = GroupCommitRequest(end)  # the flush failed: answered at once, as the service would
        failed.error = self.flush_failure.error or "the CommitLog flush did not reach this message"
        failed.complete(False)
        return failed

    def put_messages(self, msgs: list[MessageInner]) -> list[PutMessageResult]:
        results, request = self.put_messages_nowait(msgs)
        if request is not None:
            if not request.wait(self.config.flush.sync_flush_timeout_ms / 1000):
                status = PutStatus.FLUSH_DISK_FAILED if request.error else PutStatus.FLUSH_DISK_TIMEOUT
                for r in results:
                    if r.ok:
                        r.status, r.error = status, request.error
        return results

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        if not self.sync_flush and self.running and not self.disk_guard.full and self._writable_role and \
                not msg.delay_level and not self.flush_failure.error:
            return self.commit_log.put_message(msg)  # the common case, without the batch wrapping
        return self.put_messages([msg])[0]

    def put_delivered(self, msg: MessageInner) -> PutMessageResult:
        """A due delayed message back on its real topic (the schedule service)."""
        return self.put_messages([msg])[0]

    def deliver_delayed(self, now_ms: int | None = None) -> DeliveryReport:
        """Deliver every delayed message that is due (idempotent; safe to call concurrently)."""
        return self.schedule.deliver_due(now_ms)

    # ================================================================== dispatch helpers
    @property
    def last_dispatched_timestamp(self) -> int:
        return self.reput.last_dispatched_timestamp

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            with self._cq_lock:
                cq = self.consume_queue_table.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(topic, queue_id, self.store_config.consume_queue_dir,
                                      self.store_config.mapped_file_size_consume_queue_bytes)
                    self.consume_queue_table = {**self.consume_queue_table, (topic, queue_id): cq}
        return cq

    def consume_queues(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.consume_queue_table.values()))

    def destroy_logics(self) -> None:
        for cq in self.consume_queues():
            cq.destroy()
        self.consume_queue_table = {}
        if self.index_service is not None:
            self.index_service.destroy()

    def dispatch(self, timeout: float = 5.0) -> bool:
        """Wait until everything appended so far is dispatched (visible to pulls); in controller mode, everything
        below the dispatch limit (the confirm offset)."""
        return self.reput.wait_for(self.reput.end(), timeout)

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Called on the dispatcher thread once per dispatched batch with its ``(phy, size, topic,
        queue_id, queue_offset, tags_code, store_timestamp, keys, uniq_key, sys_flag)`` tuples."""
        self.reput.listeners.append(listener)

    # ================================================================== reads
    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int = 32,
        tag_hashes: set[int] | None = None,
        max_bytes: int = 4 * 1024 * 1024,
        decode: bool = True,
        views: bool = False,
    ) -> GetMessageResult:
        """Pull up to ``max_msg_nums`` messages of one queue from logical ``offset``, filtered by tag hash.
        With ``decode=False`` ``chunks`` holds raw bytes: runs of whole records, concatenated (what the
        server sends); ``queue_offsets`` has one entry per record either way. ``views=True`` (with
        ``decode=False``): the runs are memoryviews of the mapped segments, held until ``result.release()``."""
        if self.reput.reput_from_offset < self.commit_log.max_offset():
            self.reput.do_reput()  # read-your-writes: dispatch what was appended before this pull
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0,
                                    error=f"no queue {topic}-{queue_id}")
        return read_queue(self.commit_log, cq, offset, max_msg_nums, tag_hashes, max_bytes, decode, views)

    def delete_topic(self, topic: str) -> int:
        """Drop a topic's ConsumeQueues (its records stay in the CommitLog until retention removes them).
        Returns how many queues were removed."""
        dropped = self._drop_queues(lambda key, _cq: key[0] == topic)
        remove_empty_topic_dir(self.store_config.consume_queue_dir / topic)
        return dropped

    def clean_expired_consume_queues(self) -> int:
        """RocketMQ's ``cleanExpiredConsumerQueue`` (consume_queue.expired); how many queues it destroyed."""
        return self._drop_queues(consume_queue.expired(self.commit_log.min_offset()))

    def _drop_queues(self, doomed: consume_queue.Doomed) -> int:
        with self._cq_lock:
            self.consume_queue_table, gone = consume_queue.split_queues(self.consume_queue_table, doomed)
        return consume_queue.destroy_queues(gone, self.commit_log, doomed)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.consume_queue_table})

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in self.consume_queue_table if t == topic)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq.get_min_offset_in_queue() if cq else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Read-your-writes as :meth:`get_message`: what was appended before this call is counted."""
        if self.reput.reput_from_offset < self.commit_log.max_offset():
            self.reput.do_reput()
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq.get_max_offset_in_queue() if cq else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms`` (max offset when
        none is)."""
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return 0
        return offset_by_time(self.commit_log, cq, timestamp_ms)

    def get_queue_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        unit = cq.get_unit(offset) if cq else None
        if unit is None or unit[1] == BLANK_UNIT_SIZE:
            return -1
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's oldest message; -1 when the queue is empty."""
        return self.get_queue_store_time(topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int,
                                        in_memory_ratio_percent: int = 40) -> bool:
        """Whether the message at ``offset`` lies further behind the CommitLog's end than
        ``in_memory_ratio_percent`` of physical RAM (RocketMQ's "in disk" test); False when there is none."""
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq is not None and in_disk(self.commit_log, cq, offset, in_memory_ratio_percent)

    def delay_backlog(self) -> dict[int, dict[str, int]]:
        """Per delay level: messages waiting in ``SCHEDULE_TOPIC_XXXX`` and how due they are."""
        return self.schedule.backlog()

    def delay_offsets(self) -> dict[int, int]:
        """Per delay level, the next ``SCHEDULE_TOPIC_XXXX`` queue offset to deliver (``delayOffset.json``)."""
        return dict(sorted(self.schedule.offsets.items()))

    @property
    def max_delay_level(self) -> int:
        return self.schedule.max_level

    def segment_snapshots(self, broker_addr: Callable[[], str]) -> SegmentSnapshots:
        """The snapshot service over this store's CommitLog (hard links under ``<root>/snapshots``)."""
        return SegmentSnapshots(self.commit_log, Path(self.store_config.store_path_root_dir) / SNAPSHOTS_DIR,
                                self.clock.now_ms, broker_addr)

    def set_store_port(self, port: int) -> None:
        """The port written into STOREHOST of new records (and so into offset message ids)."""
        self.commit_log.store_port = port

    def get_message_bytes(self, phy_offset: int, size: int) -> bytes | None:
        """The stored record bytes at ``phy_offset`` (as pulls, queries and views send them)."""
        return self.commit_log.get_message_bytes(phy_offset, size)

    def put_lock_held_ms(self) -> int:
        """How long the CommitLog's put lock has been held by a put in progress (0 when it is free): what
        RocketMQ's ``isOSPageCacheBusy`` measures. Read without taking the lock."""
        begin = self.commit_log.begin_time_in_lock
        if not begin or not self.commit_log.put_lock.locked():
            return 0
        return max(1, self.commit_log.clock.now_ms() - begin)

    @property
    def max_message_size(self) -> int:
        return self.commit_log.max_message_size

    def check_message(self, msg: MessageInner) -> PutMessageResult | None:
        """The put limits: a result when ``msg`` would be refused, else None (nothing is written)."""
        return self.commit_log.check(msg)

    def look_message_by_offset(self, phy_offset: int) -> MessageRecord | None:
        try:
            record = self.commit_log.look_message_by_offset(phy_offset)
        except CodecError:
            return None
        if record is None or record.commit_log_offset != phy_offset:
            return None
        return record

    def view_message_by_id(self, offset_msg_id: str) -> MessageRecord | None:
        """Message by offset message id (raises CodecError for a malformed id)."""
        _, _, phy = decode_offset_msg_id(offset_msg_id)
        return self.look_message_by_offset(phy)

    def query_message(
        self, topic: str, key: str, max_num: int | None = None, begin_ms: int = 0, end_ms: int = MAX_TIMESTAMP,
    ) -> QueryMessageResult:
        """Messages of ``topic`` with ``key`` among their KEYS or as unique key, stored in
        ``[begin_ms, end_ms]``, newest first, at most ``max_num`` (``defaultQueryMaxNum``). Hash collisions
        are filtered out; ``truncated`` says more matches exist."""
        if self.index_service is None:
            return QueryMessageResult([], False)
        self.reput.do_reput()  # everything appended so far is searchable
        return query_by_key(self.index_service, self.look_message_by_offset, topic, key,
                            max_num or self.store_config.default_query_max_num, begin_ms, end_ms)

    # ================================================================== maintenance
    def flush(self) -> None:
        """Flush CommitLog, ConsumeQueues, index and checkpoint now (a failure sets ``flush_failure``)."""
        flush_commit_log(self, 0, rounds=10)
        self.flush_cq_service.flush(0)

    def clean_expired_files(self, now_ms: int | None = None, force: bool = False) -> RetentionReport:
        """One retention pass with the seeds' triggers (deleteWhen hour, disk ratio, manual)."""
        return self.clean_service.run(now_ms, force)

    def execute_delete_files_manually(self) -> None:
        self.clean_service.execute_delete_files_manually()

    def check_disk(self) -> DiskCheck:
        return self.disk_guard.check()

    @property
    def disk_full(self) -> bool:
        """Set by the disk guard while the CommitLog partition is over ``diskSpaceWarningLevelRatio``."""
        return self.disk_guard.full


    def _clean_loop(self) -> None:
        interval = self.config.retention.clean_resource_interval_ms / 1000
        if self._stop.wait(min(60.0, interval * 6)):
            return
        while not self._stop.is_set():
            try:
                self.clean_expired_files()
            except (OSError, StoreError):
                log.exception("retention pass failed")
            self._stop.wait(interval)

    # ================================================================== stats
    def runtime_info(self) -> dict[str, object]:
        cl = self.commit_log
        return {
            "commit_log_min_offset": cl.min_offset(),
            "commit_log_max_offset": cl.max_offset(),
            "commit_log_flushed_offset": cl.flushed_where,
            "flush_lag_bytes": cl.max_offset() - cl.flushed_where,
            "dispatch_behind_bytes": self.reput.behind(),
            "consume_queues": len(self.consume_queue_table),
            "index_files": len(self.index_service.files) if self.index_service else 0,
            "disk_full": self.disk_full,
            "last_exit_ok": self.last_exit_ok,
            "flush_failed": self.flush_failure.error,
            "quarantined": ",".join(self.quarantined),
        }
