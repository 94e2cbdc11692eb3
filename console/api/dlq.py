"""Dead-letter endpoints: the groups with dead letters, browse a group's dead letters and resend them."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, can_read_bodies, group_param, validated
from console.api.serializers import LimitSerializer, ResendSerializer, SearchSerializer
from console.jobs.resend import start_resend_job
from console.jobs.selectors import job_json
from console.roles import OPERATOR, VIEWER
from console.selectors.dlq import list_dlqs
from console.selectors.messages import dead_letters, message_json
from console.services.messages import resend_dead_letters


class DeadLetterQueueListView(RoleAPIView):
    """``GET /dlq/?search=``: groups that have a DLQ, each with ``count`` and the ``newest`` dead letter time."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="dlq_list", parameters=[SearchSerializer])
    def get(self, request: Request) -> Response:
        rows = list_dlqs(validated(SearchSerializer, request.query_params)["search"])
        return Response({"results": rows, "count": len(rows)})


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
    """``POST /dlq/{group}/resend/``: re-produce dead letters; one result per offset message id. With
    ``"async": true``: 202 with a job (``GET /jobs/{id}/``) that a Celery worker runs. A dead letter resent
    before answers with its earlier copy (``already_resent``) unless ``"force": true``."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=ResendSerializer)
    def post(self, request: Request, group: str) -> Response:
        data = validated(ResendSerializer, request.data)
        ids = [i.upper() for i in data["offset_msg_ids"]]
        if data["async"]:
            job = start_resend_job(request.user, group_param(group), ids, data.get("topic"), data["force"])
            return Response(job_json(job), status=status.HTTP_202_ACCEPTED,
                            headers={"Location": reverse("job-detail", args=[job.pk])})
        results = resend_dead_letters(request.user, group_param(group), ids, data.get("topic"), data["force"])
        return Response({"results": results})
