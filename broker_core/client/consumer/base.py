"""What both consumers share: consume-from names, pull results, subscription data and the pull request."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from broker_core.client.consumer.offset_store import OffsetStore
from broker_core.client.instance import ClientInstance, shared_instance
from broker_core.client.message import ClientError, MessageExt, MessageQueue, decode_message_exts
from broker_core.codec.hashing import tag_hash
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.protocol.filter import Subscription, parse_subscription
from broker_core.protocol.headers import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND
from broker_core.protocol.validation import group_error

log = logging.getLogger(__name__)

CONSUME_FROM_LAST = "LAST"
CONSUME_FROM_FIRST = "FIRST"
CONSUME_FROM_TIMESTAMP = "TIMESTAMP"
_FROM_WIRE = {CONSUME_FROM_LAST: "CONSUME_FROM_LAST_OFFSET", CONSUME_FROM_FIRST: "CONSUME_FROM_FIRST_OFFSET",
              CONSUME_FROM_TIMESTAMP: "CONSUME_FROM_TIMESTAMP"}
# RocketMQ's ConsumeFromWhere names (the deprecated ones behave as RocketMQ 4.9 treats them).
_FROM_ROCKETMQ = {"CONSUME_FROM_LAST_OFFSET": CONSUME_FROM_LAST, "CONSUME_FROM_FIRST_OFFSET": CONSUME_FROM_FIRST,
                  "CONSUME_FROM_TIMESTAMP": CONSUME_FROM_TIMESTAMP,
                  "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST": CONSUME_FROM_LAST,
                  "CONSUME_FROM_MIN_OFFSET": CONSUME_FROM_LAST, "CONSUME_FROM_MAX_OFFSET": CONSUME_FROM_LAST}
BROKER_SUSPEND_MAX_S = 15.0
CONSUMER_TIMEOUT_WHEN_SUSPEND_S = 30.0
PULL_DELAY_ON_ERROR_S = 3.0
PULL_DELAY_ON_FLOW_CONTROL_S = 0.05


decode_records = decode_message_exts


def subscription_data(sub: Subscription, sub_version: int) -> dict[str, object]:
    """RocketMQ's ``SubscriptionData``: tags joined by ``||``, their Java hash codes, the expression type."""
    tags = sorted(sub.tags) if sub.tags is not None else []
    return {"classFilterMode": False, "codeSet": [tag_hash(t) for t in tags], "expressionType": sub.expression_type,
            "subString": sub.expression, "subVersion": sub_version, "tagsSet": tags, "topic": sub.topic}


class PullStatus:
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


class _ConsumerBase:
    def __init__(self, group: str, namesrv_addr: str, instance: ClientInstance | None,
                 credentials: SessionCredentials | None = None, instance_name: str | None = None) -> None:
        err = group_error(group)
        if err:
            raise ValueError(err)
        self.group = group
        self.instance = shared_instance(instance, namesrv_addr, credentials, instance_name)
        self._registered = False
        self.pull_from: dict[MessageQueue, int] = {}  # the broker id each queue's last pull answer suggested
        self.offset_store: OffsetStore | None = None

    def _register(self) -> None:
        """One consumer per group on a client instance (RocketMQ's ``registerConsumer``); raises ValueError."""
        if not self._registered:
            self.instance.register_consumer(self.group)
            self._registered = True

    def _unregister(self) -> None:
        if self._registered:
            self.instance.consumer_groups.discard(self.group)
            self._registered = False

    async def _queue_request(self, mq: MessageQueue, code: int, header: dict[str, object],
                             timeout: float = 3.0) -> RemotingCommand:
        return (await self._admin_request(mq, code, header, timeout))[0]

    async def _admin_request(self, mq: MessageQueue, code: int, header: dict[str, object],
                             timeout: float = 3.0) -> tuple[RemotingCommand, bool]:
        """A request about ``mq`` to its master, or to a slave while the master cannot be reached (a master that
        refuses the connection is passed over and the request goes to a slave at once). Returns the response
        and whether a slave answered."""
        await self.instance.route(mq.topic)
        cmd = RemotingCommand.request(code, {"topic": mq.topic, "queueId": mq.queue_id, **header})
        return await self._invoke_group(mq.broker_name, 0, cmd, timeout)

    async def _invoke_group(self, broker_name: str, broker_id: int, cmd: RemotingCommand,
                            timeout: float) -> tuple[RemotingCommand, bool]:
        tried: set[str] = set()
        while True:
            addr, slave = self.instance.find_broker(broker_name, broker_id)
            if addr in tried:
                raise ConnectionError(f"no broker of {broker_name} answered ({', '.join(sorted(tried))})")
            tried.add(addr)
            try:
                resp = await self.instance.invoke(addr, RemotingCommand(cmd.code, 0, cmd.flags, dict(cmd.header),
                                                                        cmd.body), timeout)
            except ConnectionError:
                self.instance.mark_down(addr)
                continue
            return resp, slave

    async def _offset(self, mq: MessageQueue, code: int, extra: dict[str, object] | None = None) -> int:
        resp = await self._queue_request(mq, code, extra or {})
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)
        return int(resp.header["offset"])

    async def apull(self, mq: MessageQueue, offset: int, max_nums: int = 32, sub: Subscription | None = None,
                    suspend_s: float = 0.0, commit_offset: int = -1, sub_version: int = 0) -> PullResult:
        """PULL_MESSAGE with RocketMQ's ``sysFlag``: SUBSCRIPTION always (the expression travels with the
        request), SUSPEND when ``suspend_s`` > 0 (the broker may hold the request), COMMIT_OFFSET when
        ``commit_offset`` >= 0 (the broker stores it)."""
        sub = sub or parse_subscription(mq.topic, "*")
        await self.instance.route(mq.topic)
        addr, slave = self.instance.find_broker(mq.broker_name, self.pull_from.get(mq, 0))
        if slave and commit_offset >= 0:  # a slave does not store it (Java clears the flag): commit it apart
            if self.offset_store is not None:
                await self.offset_store.update(mq, commit_offset)
            commit_offset = -1
        cmd, timeout = self._pull_command(mq, offset, max_nums, sub, suspend_s, commit_offset, sub_version)
        try:
            resp = await self.instance.invoke(addr, cmd, timeout)
        except ConnectionError:
            self.instance.mark_down(addr)  # the next pull goes to another broker of the group
            await self.instance.refresh_route(mq.topic)  # and to the master elected meanwhile, if any
            raise
        return self._pull_result(mq, sub, offset, resp)

    def _pull_command(self, mq: MessageQueue, offset: int, max_nums: int, sub: Subscription, suspend_s: float,
                      commit_offset: int, sub_version: int) -> tuple[RemotingCommand, float]:
        """The PULL_MESSAGE request and the client's timeout for it."""
        sys_flag = PULL_SUBSCRIPTION | (PULL_SUSPEND if suspend_s > 0 else 0) | (
            PULL_COMMIT_OFFSET if commit_offset >= 0 else 0)
        header = {"consumerGroup": self.group, "queueOffset": offset, "maxMsgNums": max_nums, "sysFlag": sys_flag,
                  "commitOffset": max(commit_offset, 0), "suspendTimeoutMillis": int(suspend_s * 1000),
                  "subscription": sub.expression, "subVersion": sub_version, "expressionType": sub.expression_type}
        # RocketMQ's consumerTimeoutMillisWhenSuspend: a held pull times out on the client after 30 s
        timeout = max(suspend_s + 5.0, CONSUMER_TIMEOUT_WHEN_SUSPEND_S) if suspend_s > 0 else 5.0
        return RemotingCommand.request(RequestCode.PULL_MESSAGE,
                                       {"topic": mq.topic, "queueId": mq.queue_id, **header}), timeout

    def _pull_result(self, mq: MessageQueue, sub: Subscription, offset: int, resp: RemotingCommand) -> PullResult:
        """The broker's answer to a pull as a :class:`PullResult`; raises ClientError for an error code."""
        h = resp.header
        if "suggestWhichBrokerId" in h:  # RocketMQ's pullFromWhichNodeTable
            self.pull_from[mq] = int(h["suggestWhichBrokerId"])
        nxt, lo, hi = int(h.get("nextBeginOffset", offset)), int(h.get("minOffset", 0)), int(h.get("maxOffset", 0))
        if resp.code == ResponseCode.SUCCESS:
            msgs = decode_records(resp.body, mq.broker_name)
            if sub.tags is not None or sub.is_sql92:  # the client re-checks (tags: the broker compared hashes)
                msgs = [m for m in msgs if sub.matches_message(m.properties)]
            return PullResult(PullStatus.FOUND if msgs else PullStatus.NO_MATCHED_MSG, nxt, lo, hi, msgs)
        if resp.code == ResponseCode.PULL_NOT_FOUND:
            return PullResult(PullStatus.NO_NEW_MSG, nxt, lo, hi)
        if resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY:
            return PullResult(PullStatus.NO_MATCHED_MSG, nxt, lo, hi)
        if resp.code == ResponseCode.PULL_OFFSET_MOVED:
            return PullResult(PullStatus.OFFSET_ILLEGAL, nxt, lo, hi)
        raise ClientError(resp.code, resp.remark)


async def check_client_in_brokers(instance: ClientInstance, group: str, subscriptions: dict[str, Subscription],
                                  sub_versions: dict[str, int]) -> None:
    """RocketMQ's ``checkClientInBroker``: each SQL92 subscription is sent as CHECK_CLIENT_CONFIG to the masters
    of its topic (routes already looked up), so a broker without ``enablePropertyFilter`` or a bad expression fails
    the consumer's start with the broker's reason instead of failing every pull later."""
    for topic, sub in subscriptions.items():
        if not sub.is_sql92 or topic not in instance.routes:
            continue
        body = json.dumps({"clientId": instance.client_id, "group": group,
                           "subscriptionData": subscription_data(sub, sub_versions.get(topic, 0))}).encode()
        for b in instance.routes[topic].broker_datas:
            addr = b.get("brokerAddrs", {}).get("0")
            if not addr:
                continue
            resp = await instance.invoke(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body))
            if resp.code != ResponseCode.SUCCESS:
                raise ClientError(resp.code, f"check client in broker {b.get('brokerName')}: {resp.remark}")
