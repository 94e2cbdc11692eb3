"""PullConsumer: the application picks queues and offsets and commits them itself."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from broker_core.client.consumer.base import BROKER_SUSPEND_MAX_S, PullResult, _ConsumerBase
from broker_core.client.instance import ClientInstance
from broker_core.client.message import ClientError, MessageQueue
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.filter import Subscription, parse_subscription
from broker_core.remoting.blocking import BlockingClient, Submitted
from broker_core.remoting.client import run_sync


class PullConsumer(_ConsumerBase):
    """Pull messages from queues you choose, at offsets you manage."""

    def __init__(self, group: str, namesrv_addr: str, *, instance: ClientInstance | None = None,
                 credentials: SessionCredentials | None = None, instance_name: str | None = None) -> None:
        super().__init__(group, namesrv_addr, instance, credentials, instance_name)
        # pull() on the calling thread over a blocking socket (no hop to the client event loop and back)
        self.blocking = BlockingClient(credentials=self.instance.credentials)

    def start(self) -> PullConsumer:
        if self._registered:
            return self
        self._register()
        run_sync(self.instance.start())
        return self

    def shutdown(self) -> None:
        self.blocking.close()
        if self._registered:
            self._unregister()
            run_sync(self.instance.shutdown())

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return list(run_sync(self.instance.route(topic, refresh=True)).read_queues)

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
             expression_type: str = "TAG") -> PullResult:
        """One pull; ``expression`` by tag, or SQL92 over properties with ``expression_type="SQL92"``. Runs on the
        calling thread over a blocking socket once the topic's route is known (as ``Producer.send``); the first
        pull of a topic looks the route up through the client event loop."""
        return self._pull_here(mq, offset, max_nums, parse_subscription(mq.topic, expression, expression_type), 0.0)

    def pull_block_if_not_found(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
                                timeout: float = BROKER_SUSPEND_MAX_S, expression_type: str = "TAG") -> PullResult:
        """Long polling: the broker holds the request until a message arrives or ``timeout`` passes. Runs on the
        calling thread as :meth:`pull` (the held request waits in this thread's socket read, and the reply is
        decoded here, not on the client event loop that producers in this process share)."""
        return self._pull_here(mq, offset, max_nums, parse_subscription(mq.topic, expression, expression_type),
                               timeout)

    def _pull_here(self, mq: MessageQueue, offset: int, max_nums: int, sub: Subscription,
                   suspend_s: float) -> PullResult:
        if mq.topic not in self.instance.routes:
            return run_sync(self.apull(mq, offset, max_nums, sub, suspend_s))
        addr, _ = self.instance.find_broker(mq.broker_name, self.pull_from.get(mq, 0))
        cmd, timeout = self._pull_command(mq, offset, max_nums, sub, suspend_s, -1, 0)
        try:
            resp = self.blocking.invoke(addr, cmd, timeout)
        except ConnectionError:
            self.instance.mark_down(addr)  # the next pull goes to another broker of the group
            raise
        return self._pull_result(mq, sub, offset, resp)

    def pull_ahead(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
                   in_flight: int = 2, expression_type: str = "TAG") -> Iterator[PullResult]:
        """The pulls of ``mq`` from ``offset`` on, in order, each from the previous one's ``next_begin_offset``
        (what a loop of :meth:`pull` gives), with up to ``in_flight`` requests outstanding on this thread's socket:
        while the application handles one batch the broker reads the next (a consumer catching up a deep queue
        waits for neither the broker's disk read nor the round trip). The offsets of requests sent ahead are
        guessed from the last answer's stride (how far it moved the offset); an answer to a wrong guess is
        dropped and the pull is sent again from the right offset. Only while answers move the offset: one that
        does not (NO_NEW_MSG, OFFSET_ILLEGAL) is yielded and the next pull is sent when the next result is asked
        for. Never holds a request at the broker (no long polling). Closing the iterator drops the answers
        still in flight."""
        if in_flight < 1:
            raise ValueError("in_flight must be at least 1")
        sub = parse_subscription(mq.topic, expression, expression_type)
        if mq.topic not in self.instance.routes:
            run_sync(self.instance.route(mq.topic))
        sent: deque[tuple[int, Submitted]] = deque()  # (offset, request) in the order sent
        want, ahead, stride = offset, offset, 0  # the next offset to yield, the next to send, the last stride
        try:
            while True:
                if not sent or sent[0][0] != want:  # nothing sent for the offset wanted: the guesses were wrong
                    ahead = want
                while len(sent) < (in_flight if stride else 1) or not any(o == want for o, _ in sent):
                    sent.append((ahead, self._submit_pull(mq, ahead, max_nums, sub)))
                    ahead += stride
                    if not stride:
                        break
                at, req = sent.popleft()
                try:
                    resp = self.blocking.result(req)
                except ConnectionError:
                    self.instance.mark_down(req.sock.addr)
                    raise
                if at != want:
                    continue  # the answer to a wrong guess
                result = self._pull_result(mq, sub, at, resp)
                want = result.next_begin_offset
                stride = want - at if want > at else 0
                yield result
        finally:
            for _, req in sent:
                self.blocking.discard(req)

    def _submit_pull(self, mq: MessageQueue, offset: int, max_nums: int, sub: Subscription) -> Submitted:
        addr, _ = self.instance.find_broker(mq.broker_name, self.pull_from.get(mq, 0))
        cmd, timeout = self._pull_command(mq, offset, max_nums, sub, 0.0, -1, 0)
        try:
            return self.blocking.submit(addr, cmd, timeout)
        except ConnectionError:
            self.instance.mark_down(addr)
            raise

    def min_offset(self, mq: MessageQueue) -> int:
        return run_sync(self._offset(mq, RequestCode.GET_MIN_OFFSET))

    def max_offset(self, mq: MessageQueue) -> int:
        return run_sync(self._offset(mq, RequestCode.GET_MAX_OFFSET))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return run_sync(self._offset(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"timestamp": timestamp_ms}))

    def committed_offset(self, mq: MessageQueue) -> int:
        """The broker's answer to QUERY_CONSUMER_OFFSET; -1 when it has none. As RocketMQ, a group that never
        committed gets 0 while the queue still starts at 0 and its first message is in memory."""
        async def query() -> int:
            resp = await self._queue_request(mq, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": self.group})
            return int(resp.header["offset"]) if resp.code == ResponseCode.SUCCESS else -1
        return run_sync(query())

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        async def commit() -> None:
            resp = await self._queue_request(mq, RequestCode.UPDATE_CONSUMER_OFFSET,
                                             {"consumerGroup": self.group, "commitOffset": offset})
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(resp.code, resp.remark)
        run_sync(commit())
