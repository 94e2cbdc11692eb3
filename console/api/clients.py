"""Endpoints that reach a consumer group's live clients through the brokers: running info (307) and direct
consumption of a stored message (309, operators, audited)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, group_param, validated
from console.roles import OPERATOR, VIEWER, has_role
from console.selectors import messages as message_selectors
from console.selectors.clients import client_running_info, group_running_info
from console.services.clients import consume_directly


class ConsumeDirectlySerializer(serializers.Serializer):
    group = serializers.CharField(max_length=255)
    client_id = serializers.CharField(max_length=255)


class GroupClientsView(RoleAPIView):
    """``GET /consumer-groups/{group}/clients/``: every online client with its running info (or the ``error`` it
    answered instead), asked now."""

    required_roles = {"GET": VIEWER}

    def get(self, request: Request, group: str) -> Response:
        return Response({"results": group_running_info(group_param(group))})


class ClientRunningInfoView(RoleAPIView):
    """``GET /consumer-groups/{group}/clients/{client_id}/running-info/[?jstack=true]``: one client's running
    info; ``jstack`` (its threads' stacks) for operators. 409 not online, 504 no answer in time."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[OpenApiParameter("jstack", bool, description="include the client's thread stacks")])
    def get(self, request: Request, group: str, client_id: str) -> Response:
        jstack = request.query_params.get("jstack", "").lower() == "true" and has_role(request.user, OPERATOR)
        return Response(client_running_info(group_param(group), client_id, jstack))


class ConsumeDirectlyView(RoleAPIView):
    """``POST /messages/{msg_id}/consume-directly/[?topic=T]`` ``{group, client_id}``: the client's answer
    (``consume_result``, ``remark``, ``spent_ms``, ``at``)."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=ConsumeDirectlySerializer,
                   parameters=[OpenApiParameter("topic", str, description="the topic of a unique message id")])
    def post(self, request: Request, msg_id: str) -> Response:
        data = validated(ConsumeDirectlySerializer, request.data)
        msg = message_selectors.find_message(msg_id, request.query_params.get("topic"))
        return Response(consume_directly(request.user, msg.offset_msg_id, data["group"], data["client_id"],
                                         msg.topic))
