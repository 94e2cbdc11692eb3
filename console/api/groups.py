"""Consumer group endpoints: list, stats, receive, ack, nack and offset reset."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, group_param, validated
from console.api.serializers import (
    AckSerializer,
    GroupQuerySerializer,
    NackSerializer,
    ReceiveSerializer,
    ResetOffsetSerializer,
    SearchSerializer,
)
from console.api.topics import PAGE_PARAMETERS, page_params
from console.roles import OPERATOR, VIEWER
from console.selectors.groups import consume_stats, groups_page, reset_preview
from console.services import consumers
from console.services.groups import reset_offset


class ConsumerGroupListView(RoleAPIView):
    """``GET /consumer-groups/?search=&page=&page_size=``: groups with total lag and online clients; ``sources``
    says how each is known (the protocol cannot list every group: see
    :func:`console.selectors.groups.list_groups`)."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="consumer_groups_list", parameters=[SearchSerializer, *PAGE_PARAMETERS])
    def get(self, request: Request) -> Response:
        """Paged: ``results`` (one page), ``count`` (every match), ``page``, ``page_size``, ``pages``."""
        search = validated(SearchSerializer, request.query_params)["search"]
        page, page_size = page_params(request)
        return Response(groups_page(search, page, page_size))


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
                                     data["invisible_seconds"], data["wait_seconds"], user=request.user,
                                     expression=data["expression"], expression_type=data["expression_type"])
        return Response({"messages": messages})


class AckView(RoleAPIView):
    """``POST /consumer-groups/{group}/ack/``: one result per receipt handle."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=AckSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(AckSerializer, request.data)
        results = consumers.ack(request.user, group_param(group), data["topic"], data["receipt_handles"])
        return Response({"results": results})


class NackView(RoleAPIView):
    """``POST /consumer-groups/{group}/nack/``: make messages visible again (redelivered about 1 s later, the
    broker's minimum invisible time); one result per receipt handle, with the replacement handle."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=NackSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(NackSerializer, request.data)
        results = consumers.nack(request.user, group_param(group), data["topic"], data["receipt_handles"])
        return Response({"results": results})


class ResetOffsetView(RoleAPIView):
    """``POST /consumer-groups/{group}/reset-offset/``: per queue the current and target offset and how many
    messages would be replayed (negative: skipped); ``dry_run`` changes nothing, otherwise the reset is applied
    and each queue has ``applied_offset``."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=ResetOffsetSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(ResetOffsetSerializer, request.data)
        group = group_param(group)
        if data["dry_run"]:
            return Response({**reset_preview(group, data["topic"], data["target"]), "dry_run": True})
        return Response({**reset_offset(request.user, group, data["topic"], data["target"]), "dry_run": False})
