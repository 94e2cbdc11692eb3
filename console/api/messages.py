"""Message lookups: by id (offset id, or unique id with ``?topic=``) and by topic + key."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, can_read_bodies, validated
from console.api.serializers import MessageSearchSerializer
from console.roles import VIEWER
from console.selectors import messages as selectors
from console.selectors import tracking


class MessageDetailView(RoleAPIView):
    """``GET /messages/{msg_id}/``: an offset message id, or a unique id with ``?topic=T``."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[OpenApiParameter("topic", str, description="the topic of a unique message id")])
    def get(self, request: Request, msg_id: str) -> Response:
        msg = selectors.find_message(msg_id, request.query_params.get("topic"))
        return Response(selectors.message_json(msg, can_read_bodies(request)))


class MessageConsumptionView(RoleAPIView):
    """``GET /messages/{msg_id}/consumption/[?topic=T]``: for every group consuming the message's topic, whether
    it is ``consumed``, ``not_consumed``, ``filtered`` (its expression does not match), ``retrying`` or
    ``dead_lettered`` (rocketmq-dashboard's "track message"), with the evidence."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[OpenApiParameter("topic", str, description="the topic of a unique message id")])
    def get(self, request: Request, msg_id: str) -> Response:
        msg = selectors.find_message(msg_id, request.query_params.get("topic"))
        return Response({"message": selectors.message_json(msg, False), "groups": tracking.consumption_status(msg)})


class MessageSearchView(RoleAPIView):
    """``GET /messages/?topic=T&key=K[&begin=&end=&limit=]``: by key, newest first, ``next`` always null and
    ``truncated`` true if more exist.

    ``GET /messages/?topic=T&begin=ISO&end=ISO[&cursor=&limit=]``: every message stored in [begin, end] (end
    defaults to unbounded) over every queue, oldest first; ``next`` is the cursor of the following page (pass it
    with the same topic and end) and is set exactly when ``limit`` cut the page (``truncated``). No other cap.
    ``&sql=EXPR`` keeps only messages a SQL92 selector matches (RocketMQ's ``MessageSelector.bySql``).
    """

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="messages_search", parameters=[MessageSearchSerializer])
    def get(self, request: Request) -> Response:
        q = validated(MessageSearchSerializer, request.query_params)
        begin_ms = int(q["begin"].timestamp() * 1000) if q.get("begin") else 0
        end_ms = int(q["end"].timestamp() * 1000) if q.get("end") else selectors.MAX_TIMESTAMP_MS
        with_body = can_read_bodies(request)
        if q.get("key") is not None:
            found, truncated = selectors.messages_by_key(q["topic"], q["key"], q["limit"], begin_ms, end_ms)
            nxt = None
        else:
            found, nxt = selectors.browse(q["topic"], max(begin_ms, 0), end_ms, q.get("cursor", ""), q["limit"],
                                          q.get("sql", ""))
            truncated = nxt is not None
        return Response({"results": [selectors.message_json(m, with_body) for m in found], "next": nxt,
                         "truncated": truncated})
