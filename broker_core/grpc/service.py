"""``apache.rocketmq.v2.MessagingService`` on the broker (RocketMQ 5's "local" proxy mode): every RPC of the
official clients, answered with the status codes of ``definition.proto`` (gRPC's own status stays OK).

Each RPC delegates to one service: routes (:mod:`.route`), sends and transactions (:mod:`.send`), receive/ack
(:mod:`.receive`), Telemetry (:mod:`.telemetry`); the offset RPCs (PullMessage, UpdateOffset, GetOffset,
QueryOffset) read and write the same committed offsets as the remoting path. Everything runs on the broker's
event loop, so it shares the broker's state without locks.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc

from broker_core.grpc import convert
from broker_core.grpc.auth import GrpcAuthenticator
from broker_core.grpc.forward import SendForwarder
from broker_core.grpc.receive import ReceiveService
from broker_core.grpc.route import RouteService
from broker_core.grpc.send import SendService
from broker_core.grpc.stubs import pb, service_pb2_grpc, svc
from broker_core.grpc.telemetry import telemetry
from broker_core.grpc.timer import TimerService
from broker_core.protocol.filter import SubscriptionParseError, parse_subscription
from broker_core.protocol.validation import topic_error
from broker_core.store import GetStatus

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

MAX_PULL_POLL_S = 30.0


def _client_id(context: Any) -> str:
    return str(dict(context.invocation_metadata() or ()).get("x-mq-client-id", ""))


def _peer_host(context: Any) -> str:
    """``ipv4:127.0.0.1:5555`` -> ``127.0.0.1``."""
    peer = str(context.peer() or "")
    host = peer.split(":", 1)[1] if ":" in peer else peer
    return host.rpartition(":")[0] or "0.0.0.0"


_Servicer: Any = service_pb2_grpc.MessagingServiceServicer  # generated code, untyped


class MessagingService(_Servicer):
    def __init__(self, ctl: Broker, routes: RouteService, timer: TimerService) -> None:
        self.ctl = ctl
        self.routes = routes
        self.sender = SendService(ctl, timer)
        self.forwarder = SendForwarder(ctl, routes)  # a slave's sends to its master (controller mode)
        self.receiver = ReceiveService(ctl)
        self.auth = GrpcAuthenticator(ctl.acl)  # ACL 1.0 as the proxy's (aclEnable), over remoting's rules

    # ------------------------------------------------------------------ routes, clients
    async def QueryRoute(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        topic = request.topic.name
        if topic_error(topic):
            return svc.QueryRouteResponse(status=convert.status(pb.ILLEGAL_TOPIC, topic_error(topic) or ""))
        queues = await self.routes.message_queues(topic, request.endpoints)
        if not queues:
            return svc.QueryRouteResponse(status=convert.status(pb.TOPIC_NOT_FOUND, convert.no_route_message(topic)))
        return svc.QueryRouteResponse(status=convert.status(pb.OK), message_queues=queues)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        topic = request.topic.name
        assignments = await self.routes.assignments(topic, request.endpoints)
        if not assignments:
            return svc.QueryAssignmentResponse(status=convert.status(pb.TOPIC_NOT_FOUND,
                                                                     convert.no_route_message(topic)))
        return svc.QueryAssignmentResponse(status=convert.status(pb.OK), assignments=assignments)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return svc.HeartbeatResponse(status=convert.status(pb.OK))

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        client_id = _client_id(context)
        if client_id:
            for members in self.ctl.consumers.producers.values():
                members.pop(client_id, None)
            self.receiver.renewals.client_gone(client_id)  # its handles come back at their deadlines
        return svc.NotifyClientTerminationResponse(status=convert.status(pb.OK))

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        # grpc.aio streams only from a handler that is itself an async generator function
        requests = self.auth.guard(request_iterator, context)  # each command checked; ends at a refused one
        async for cmd in telemetry(self.ctl, requests, _client_id(context), _peer_host(context)):
            yield cmd
        if requests.refused is not None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, requests.refused)

    # ------------------------------------------------------------------ produce
    async def SendMessage(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        if not request.messages:
            return svc.SendMessageResponse(status=convert.status(pb.BAD_REQUEST, "no message to send"))
        forwarded = await self.forwarder.forward(request, context)
        if forwarded is not None:
            return forwarded
        return await self.sender.send(request, _peer_host(context))

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return self.sender.end_transaction(request)

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return svc.RecallMessageResponse(status=convert.status(pb.NOT_IMPLEMENTED, "recall is not supported"))

    async def SyncLiteSubscription(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return svc.SyncLiteSubscriptionResponse(status=convert.status(pb.NOT_IMPLEMENTED,
                                                                      "lite topics are not supported"))

    # ------------------------------------------------------------------ receive / ack
    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        await self.auth.check(request, context)
        async for resp in self.receiver.receive(request, context.time_remaining(), _client_id(context)):
            yield resp

    async def AckMessage(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return await self.receiver.ack(request)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return await self.receiver.change_invisible(request)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        return await self.receiver.forward_to_dlq(request)

    # ------------------------------------------------------------------ offsets and pull
    def _queue(self, mq: Any) -> tuple[str, int, Any | None]:
        topic, queue_id = mq.topic.name, int(mq.id)
        cfg = self.ctl.topics.get(topic)
        if cfg is None:
            return topic, queue_id, convert.status(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        if not 0 <= queue_id < max(cfg.read_queue_nums, cfg.write_queue_nums):
            return topic, queue_id, convert.status(pb.BAD_REQUEST, f"topic {topic} has no queue {queue_id}")
        return topic, queue_id, None

    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        topic, queue_id, err = self._queue(request.message_queue)
        if err is not None:
            return svc.UpdateOffsetResponse(status=err)
        if request.offset < 0:
            return svc.UpdateOffsetResponse(status=convert.status(pb.ILLEGAL_OFFSET, "offset must be >= 0"))
        self.ctl.offsets.commit(request.group.name, topic, queue_id, int(request.offset))
        return svc.UpdateOffsetResponse(status=convert.status(pb.OK))

    async def GetOffset(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        topic, queue_id, err = self._queue(request.message_queue)
        if err is not None:
            return svc.GetOffsetResponse(status=err)
        offset = self.ctl.offsets.query(request.group.name, topic, queue_id)
        if offset < 0:
            return svc.GetOffsetResponse(status=convert.status(pb.OFFSET_NOT_FOUND, "the group has no offset here"))
        return svc.GetOffsetResponse(status=convert.status(pb.OK), offset=offset)

    async def QueryOffset(self, request: Any, context: Any) -> Any:
        await self.auth.check(request, context)
        topic, queue_id, err = self._queue(request.message_queue)
        if err is not None:
            return svc.QueryOffsetResponse(status=err)
        store = self.ctl.store
        if request.query_offset_policy == pb.BEGINNING:
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif request.query_offset_policy == pb.END:
            offset = store.get_max_offset_in_queue(topic, queue_id)
        else:
            offset = store.get_offset_in_queue_by_time(topic, queue_id, convert.millis(request.timestamp))
        return svc.QueryOffsetResponse(status=convert.status(pb.OK), offset=offset)

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """Messages of one queue from ``offset`` (status, messages, next_offset), waiting up to
        ``long_polling_timeout`` for one when there is none."""
        await self.auth.check(request, context)
        topic, queue_id, err = self._queue(request.message_queue)
        if err is not None:
            yield svc.PullMessageResponse(status=err)
            return
        fe = request.filter_expression
        try:
            sub = parse_subscription(topic, fe.expression or "*", "SQL92" if fe.type == pb.SQL else "TAG")
        except SubscriptionParseError as exc:
            yield svc.PullMessageResponse(status=convert.status(pb.ILLEGAL_FILTER_EXPRESSION, str(exc)))
            return
        batch = max(1, min(request.batch_size or 32, 256))
        wait_s = min(convert.duration_ms(request.long_polling_timeout, 0) / 1000, MAX_PULL_POLL_S)
        remaining = context.time_remaining()
        if remaining is not None:
            wait_s = min(wait_s, max(0.0, remaining - 1.0))
        deadline = time.monotonic() + wait_s
        store = self.ctl.store
        while True:
            res = store.get_message(topic, queue_id, int(request.offset), batch, sub.tag_hashes)
            left = deadline - time.monotonic()
            if res.status is GetStatus.FOUND or left <= 0 or self.ctl.hold is None or \
                    res.status not in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE):
                break
            await self.ctl.hold.wait(topic, queue_id, min(left, 1.0))
        found = [m for m in res.messages if sub.matches_message(m.properties)] \
            if res.status is GetStatus.FOUND else []
        yield svc.PullMessageResponse(status=convert.status(pb.OK if found else pb.MESSAGE_NOT_FOUND))
        for rec in found:
            yield svc.PullMessageResponse(message=convert.to_pb(rec, topic))
        self.ctl.stats.get_count += len(found)
        yield svc.PullMessageResponse(next_offset=res.next_begin_offset)
