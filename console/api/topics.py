"""Topic endpoints: list/create, detail/update/delete, route, stats and produce."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.api.serializers import ProduceSerializer, TopicCreateSerializer, TopicUpdateSerializer, plain_produce
from console.errors import bad_request
from console.roles import ADMIN, OPERATOR, VIEWER
from console.selectors import topics as topic_selectors
from console.services import messages as message_services
from console.services import topics as topic_services


def page_params(request: Request) -> tuple[int, int]:
    """``?page=`` (from 1) and ``?page_size=`` (1..PAGE_SIZE_MAX, the default) of a paged list, or a 400."""
    try:
        page = int(request.query_params.get("page", 1))
        page_size = int(request.query_params.get("page_size", topic_selectors.PAGE_SIZE_MAX))
    except ValueError:
        raise bad_request("invalid_page", "page and page_size must be integers") from None
    if page < 1 or not 1 <= page_size <= topic_selectors.PAGE_SIZE_MAX:
        raise bad_request("invalid_page", f"page must be >= 1 and page_size 1..{topic_selectors.PAGE_SIZE_MAX}")
    return page, page_size


PAGE_PARAMETERS = [OpenApiParameter("page", int), OpenApiParameter(
    "page_size", int, description=f"1..{topic_selectors.PAGE_SIZE_MAX} (the default)")]


class TopicListView(RoleAPIView):
    """``GET`` topics (``?search=``, ``?type=normal|retry|dlq|system``); ``POST`` creates one (admin)."""

    required_roles = {"GET": VIEWER, "POST": ADMIN}

    @extend_schema(operation_id="topics_list", parameters=[OpenApiParameter("search", str), OpenApiParameter(
        "type", str, enum=list(topic_selectors.TOPIC_TYPES)), *PAGE_PARAMETERS])
    def get(self, request: Request) -> Response:
        """Paged: ``results`` (one page), ``count`` (every match), ``page``, ``page_size``, ``pages``."""
        kind = request.query_params.get("type", "")
        if kind and kind not in topic_selectors.TOPIC_TYPES:
            raise bad_request("invalid_type", f"type must be one of {', '.join(topic_selectors.TOPIC_TYPES)}")
        page, page_size = page_params(request)
        return Response(topic_selectors.topics_page(request.query_params.get("search", ""), kind, page, page_size))

    @extend_schema(request=TopicCreateSerializer)
    def post(self, request: Request) -> Response:
        data = validated(TopicCreateSerializer, request.data)
        topic = topic_services.create_topic(request.user, data["name"], data["read_queue_nums"],
                                            data["write_queue_nums"], data["perm"], data.get("brokers"))
        return Response(topic, status=status.HTTP_201_CREATED)


class TopicDetailView(RoleAPIView):
    """One topic: ``GET`` its queue configuration, ``PATCH`` queue counts or permission, ``DELETE`` it."""

    required_roles = {"GET": VIEWER, "PATCH": ADMIN, "DELETE": ADMIN}

    def get(self, request: Request, name: str) -> Response:
        return Response(topic_selectors.get_topic(name))

    @extend_schema(request=TopicUpdateSerializer)
    def patch(self, request: Request, name: str) -> Response:
        changes = validated(TopicUpdateSerializer, request.data)
        return Response(topic_services.update_topic(request.user, name, dict(changes)))

    def delete(self, request: Request, name: str) -> Response:
        topic_services.delete_topic(request.user, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TopicRouteView(RoleAPIView):
    """``GET`` the name server's route of a topic."""

    required_roles = {"GET": VIEWER}

    def get(self, request: Request, name: str) -> Response:
        return Response(topic_selectors.topic_route(name))


class TopicStatsView(RoleAPIView):
    """``GET`` per-queue min/max offsets and last update time."""

    required_roles = {"GET": VIEWER}

    def get(self, request: Request, name: str) -> Response:
        return Response({"topic": name, "queues": topic_selectors.topic_stats(name)})


class TopicMessagesView(RoleAPIView):
    """``POST`` messages to a topic (operator): 201 with one result per message."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=ProduceSerializer)
    def post(self, request: Request, name: str) -> Response:
        messages = plain_produce(request.data)
        if messages is None:
            messages = validated(ProduceSerializer, request.data)["messages"]
        results = message_services.produce(request.user, name, messages)
        return Response({"results": results}, status=status.HTTP_201_CREATED)
