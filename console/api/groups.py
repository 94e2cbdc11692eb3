"""Consumer group endpoints: stats, receive and ack."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, group_param, validated
from console.api.serializers import AckSerializer, GroupQuerySerializer, ReceiveSerializer
from console.roles import OPERATOR, VIEWER
from console.selectors.groups import consume_stats
from console.services import consumers


class ConsumerGroupView(RoleAPIView):
    """``GET /consumer-groups/{group}/?topic=T``: committed offsets and lag per queue, online clients."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[GroupQuerySerializer])
    def get(self, request: Request, group: str) -> Response:
        q = validated(GroupQuerySerializer, request.query_params)
        return Response(consume_stats(group_param(group), q.get("topic")))


class ReceiveView(RoleAPIView):
    """``POST /consumer-groups/{group}/receive/``: receive messages, each with a ``receipt_handle``."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=ReceiveSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(ReceiveSerializer, request.data)
        messages = consumers.receive(group_param(group), data["topic"], data["max_messages"],
                                     data["invisible_seconds"], data["wait_seconds"])
        return Response({"messages": messages})


class AckView(RoleAPIView):
    """``POST /consumer-groups/{group}/ack/``: one result per receipt handle."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=AckSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(AckSerializer, request.data)
        results = consumers.ack(request.user, group_param(group), data["topic"], data["receipt_handles"])
        return Response({"results": results})
