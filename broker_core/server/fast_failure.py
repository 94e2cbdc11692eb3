"""Broker fast failure (RocketMQ's ``isOSPageCacheBusy`` and ``BrokerFastFailure``): when the store cannot take a
write now, a send is answered SYSTEM_BUSY at once, so the producer retries on another broker instead of waiting.

Sends run on the event loop and write synchronously; the store's put lock is held by another thread only for puts
made off the loop (delay-level delivery, topic deletion, maintenance). A send that finds the lock taken:
1. if the current holder has held it longer than ``osPageCacheBusyTimeOutMills`` (1 s), is answered at once with
   ``[PC_SYNCHRONIZED]broker busy, start flow control for a while``;
2. else waits for the lock off the loop's critical path (polling every 2 ms, other requests keep being served) and
   is answered ``[TIMEOUT_CLEAN_QUEUE]broker busy, ...`` once it has waited ``waitTimeMillsInSendQueue`` (200 ms);
3. else, once the lock is free, is written as usual.
Nothing is written for a refused send. The common case (lock free) costs one attribute read and no task.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker_core.protocol import RemotingCommand, ResponseCode
from broker_core.remoting.server import Connection, Response

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

PC_BUSY = "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
POLL_S = 0.002

SendHandler = Callable[[RemotingCommand, Connection], "Response | Awaitable[Response]"]


class FastFailure:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.waiting = 0  # sends waiting for the store lock now (RocketMQ's "size of queue")
        self.refused = 0

    def guard(self, send: SendHandler) -> SendHandler:
        """``send`` behind the fast-failure checks."""
        commit_log = self.ctl.store.commit_log
        lock = commit_log.put_lock

        def guarded(cmd: RemotingCommand, conn: Connection) -> Response | Awaitable[Response]:
            if not commit_log.begin_time_in_lock or not lock.locked():  # put_lock_held_ms() == 0, inlined
                return send(cmd, conn)
            busy = self._pc_busy(cmd)
            return busy if busy is not None else self._wait_then(send, cmd, conn)
        return guarded

    def _pc_busy(self, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.ctl.store.put_lock_held_ms() > self.ctl.config.os_page_cache_busy_timeout_ms:
            self.refused += 1
            return cmd.response(ResponseCode.SYSTEM_BUSY, PC_BUSY)
        return None

    async def _wait_then(self, send: SendHandler, cmd: RemotingCommand, conn: Connection) -> Response:
        store, limit_ms = self.ctl.store, self.ctl.config.wait_time_mills_in_send_queue
        started = time.monotonic()
        self.waiting += 1
        try:
            while store.put_lock_held_ms():
                waited_ms = int((time.monotonic() - started) * 1000)
                busy = self._pc_busy(cmd)
                if busy is not None:
                    return busy
                if waited_ms >= limit_ms:
                    self.refused += 1
                    return cmd.response(ResponseCode.SYSTEM_BUSY, (
                        f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
                        f"{waited_ms}ms, size of queue: {self.waiting}"))
                await asyncio.sleep(POLL_S)
        finally:
            self.waiting -= 1
        result = send(cmd, conn)
        return await result if inspect.isawaitable(result) else result
