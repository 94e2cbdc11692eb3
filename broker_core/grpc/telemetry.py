"""Telemetry: the settings handshake, and the open stream the broker uses to ask producers about transactions.

A client opens one bidirectional ``Telemetry`` stream per broker endpoint and writes its ``Settings``; the
broker answers with the settings merged with its own (as the proxy's ``GrpcClientSettingsManager``):
producers get ``publishing.max_body_size`` (the store's ``maxMessageSize``; a reply without it makes the
Python producer refuse every send) and an exponential backoff; consumers get ``subscription.fifo`` (the
group's ``consumeMessageOrderly``), ``receive_batch_size``, ``long_polling_timeout`` and a customised backoff
with ``max_attempts`` = the group's ``retryMaxTimes`` + 1 (after which a message is dead-lettered).

A producer's stream is also registered as a producer of the group ``<topic>`` for each topic it publishes
(gRPC half messages carry that group in ``PGROUP``), through a :class:`GrpcProducerChannel` that stands in for
a remoting connection: the broker's transaction check (``TransactionService.check``) sends it
``CHECK_TRANSACTION_STATE`` as it would to a 4.x producer, and the channel turns that into a
``recover_orphaned_transaction_command`` on the stream. The client's ``TransactionChecker`` answers with
``EndTransaction``. The registration ends with the stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from broker_core.codec import CodecError
from broker_core.codec.message import PROPERTY_REAL_TOPIC, decode_record
from broker_core.grpc import convert
from broker_core.grpc.stubs import pb, svc
from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.remoting.server import Connection

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

LONG_POLLING_S = 20
RECEIVE_BATCH = 32
CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


class GrpcProducerChannel:
    """What ``ConsumerManager.producers`` holds for a gRPC producer: ``send``, ``remote``, ``attributes``."""

    def __init__(self, client_id: str, peer: str, out: asyncio.Queue[Any]) -> None:
        self.client_id = client_id
        self.remote = peer
        self.attributes: dict[str, object] = {"language": "PYTHON", "version": 0, "protocol": "GRPC_V2"}
        self.out = out

    def send(self, cmd: RemotingCommand) -> None:
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        try:
            rec = decode_record(cmd.body, check_crc=False)
        except CodecError as exc:
            log.warning("cannot decode the half message to check: %s", exc)
            return
        topic = rec.properties.get(PROPERTY_REAL_TOPIC, rec.topic)
        msg = convert.to_pb(rec, topic)
        command = svc.RecoverOrphanedTransactionCommand(
            message=msg, transaction_id=str(cmd.header.get("offsetMsgId") or rec.offset_msg_id))
        self.out.put_nowait(svc.TelemetryCommand(recover_orphaned_transaction_command=command))


def merged_settings(ctl: Broker, settings: Any) -> Any:
    reply = pb.Settings()
    reply.CopyFrom(settings)
    if settings.client_type == pb.PRODUCER:
        reply.publishing.max_body_size = ctl.store.max_message_size
        reply.publishing.validate_message_type = False  # a topic of ours takes every type
        policy = reply.backoff_policy
        policy.Clear()
        policy.max_attempts = 3
        policy.exponential_backoff.initial.nanos = 10_000_000
        policy.exponential_backoff.max.seconds = 1
        policy.exponential_backoff.multiplier = 2
    elif settings.HasField("subscription"):
        group = ctl.groups.get_or_create(settings.subscription.group.name) if settings.subscription.group.name \
            else None
        sub = reply.subscription
        sub.fifo = bool(group and group.consume_message_orderly)
        sub.receive_batch_size = RECEIVE_BATCH
        if not sub.long_polling_timeout.seconds:
            sub.long_polling_timeout.seconds = LONG_POLLING_S
        policy = reply.backoff_policy
        policy.Clear()
        policy.max_attempts = (group.retry_max_times if group else ctl.config.max_reconsume_times) + 1
        for s in CONSUMER_BACKOFF_S:
            policy.customized_backoff.next.add(seconds=s)
    return reply


async def telemetry(ctl: Broker, requests: AsyncIterable[Any], client_id: str,
                    peer: str) -> AsyncIterator[Any]:
    """The stream's answers: one Settings reply per Settings command, and check-back commands between them."""
    out: asyncio.Queue[Any] = asyncio.Queue()
    channel = GrpcProducerChannel(client_id, peer, out)
    done = object()

    async def read() -> None:
        try:
            async for cmd in requests:
                if cmd.HasField("settings"):
                    reply = merged_settings(ctl, cmd.settings)
                    if cmd.settings.client_type == pb.PRODUCER:
                        for topic in cmd.settings.publishing.topics:
                            ctl.consumers.producers.setdefault(topic.name, {})[client_id] = cast(Connection, channel)
                    out.put_nowait(svc.TelemetryCommand(status=convert.status(pb.OK), settings=reply))
        finally:
            out.put_nowait(done)

    reader = asyncio.ensure_future(read())
    try:
        while True:
            item = await out.get()
            if item is done:
                break
            yield item
    finally:
        reader.cancel()
        for members in ctl.consumers.producers.values():
            if members.get(client_id) is cast(Connection, channel):
                del members[client_id]
