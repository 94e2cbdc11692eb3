"""Dead-letter endpoints: browse a group's dead letters and resend them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, can_read_bodies, group_param, validated
from console.api.serializers import LimitSerializer, ResendSerializer
from console.roles import OPERATOR, VIEWER
from console.selectors.messages import dead_letters, message_json
from console.services.messages import resend_dead_letters


class DeadLetterListView(RoleAPIView):
    """``GET /dlq/{group}/messages/?limit=``: oldest first; origin topic and reason are in ``properties``."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[LimitSerializer])
    def get(self, request: Request, group: str) -> Response:
        q = validated(LimitSerializer, request.query_params)
        found, truncated = dead_letters(group_param(group), q["limit"])
        with_body = can_read_bodies(request)
        return Response({"results": [message_json(m, with_body) for m in found], "next": None,
                         "truncated": truncated})


class DeadLetterResendView(RoleAPIView):
    """``POST /dlq/{group}/resend/``: re-produce dead letters; one result per offset message id."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=ResendSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(ResendSerializer, request.data)
        ids = [i.upper() for i in data["offset_msg_ids"]]
        results = resend_dead_letters(request.user, group_param(group), ids, data.get("topic"))
        return Response({"results": results})
