"""Dispatch: CommitLog records to ConsumeQueues and IndexFiles (upstream ReputMessageService, INVENTORY §11).

Invariants:
1. ``reput_from_offset`` only moves forward, record by record, and never past the CommitLog's read
   position; every record below it has been handed to every dispatcher.
2. Dispatch is idempotent: ConsumeQueues skip units they already hold and the index skips offsets it
   already indexed, so replaying a range after a crash is safe.
3. A message is visible to consumers only after dispatch (pulls read ConsumeQueues).

Crash behaviour: nothing is lost; on restart the dispatcher resumes from what the ConsumeQueues and
IndexFiles show as done (see ``recovery.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.codec.hashing import tag_hash
from broker_core.codec.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    DispatchRequest,
    check_record,
)

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore

log = logging.getLogger(__name__)

Dispatcher = Callable[[DispatchRequest], None]


class ReputMessageService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.commit_log = store.commit_log
        self.reput_from_offset = 0
        self.listeners: list[Callable[[DispatchRequest], None]] = []
        self._wakeup = threading.Event()
        self._stopped = threading.Event()
        self._dispatched = threading.Condition()
        self._thread: threading.Thread | None = None
        self.errors = 0

    # ------------------------------------------------------------------ dispatchers
    def dispatch(self, req: DispatchRequest) -> None:
        store = self.store
        tran = req.sys_flag & TRANSACTION_TYPE_MASK
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            cq = store.find_consume_queue(req.topic, req.queue_id)
            tags = req.tags
            cq.put_message_position_info(req.commit_log_offset, req.msg_size, tag_hash(tags) if tags else 0,
                                         req.consume_queue_offset)
        if store.index_service is not None:
            store.index_service.build_index(req)
        for listener in self.listeners:
            listener(req)

    # ------------------------------------------------------------------ loop
    def behind(self) -> int:
        return self.commit_log.max_offset() - self.reput_from_offset

    def do_reput(self) -> bool:
        """Dispatch everything readable. True when something was dispatched."""
        commit_log = self.commit_log
        did = False
        while self.reput_from_offset < commit_log.max_offset():
            offset = self.reput_from_offset
            result = commit_log.get_data(offset)
            if result is None:
                first = commit_log.min_offset()
                if 0 <= offset < first:
                    log.warning("reput offset %d is below the CommitLog min %d; skipping ahead", offset, first)
                    self.reput_from_offset = first
                    continue
                break
            try:
                buf = result.buffer
                limit = len(buf)
                pos = 0
                while pos < limit:
                    req = check_record(buf, pos, limit, False)
                    if req.success:
                        if req.msg_size > 0:
                            self.dispatch(req)
                            pos += req.msg_size
                            did = True
                        else:  # blank: the rest of the segment
                            pos = commit_log.roll_next_file(result.start_offset + pos) - result.start_offset
                            break
                    else:
                        self.errors += 1
                        log.error("dispatch stopped at %d: %s", result.start_offset + pos, req.error)
                        self.reput_from_offset = result.start_offset + pos
                        return did
                self.reput_from_offset = result.start_offset + pos
            finally:
                result.release()
        if did:
            with self._dispatched:
                self._dispatched.notify_all()
        return did

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if not self.do_reput():
                    self._wakeup.wait(0.001)
                    self._wakeup.clear()
            except Exception:
                log.exception("dispatcher error")
                time.sleep(0.01)

    def wakeup(self) -> None:
        if not self._wakeup.is_set():
            self._wakeup.set()

    def wait_for(self, offset: int, timeout: float = 5.0) -> bool:
        """Block until everything below ``offset`` is dispatched (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._dispatched:
            while self.reput_from_offset < offset:
                if self._thread is None:
                    self.do_reput()
                    return self.reput_from_offset >= offset
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._dispatched.wait(min(left, 0.01))
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reput-message-service", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        if self._thread is not None:
            # Let it catch up before stopping, as upstream does.
            self.wait_for(self.commit_log.max_offset(), timeout=5.0)
            self._stopped.set()
            self._wakeup.set()
            self._thread.join()
            self._thread = None
