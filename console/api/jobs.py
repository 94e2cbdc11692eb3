"""Background job endpoints."""

from __future__ import annotations

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView
from console.jobs.resend import retry_job
from console.jobs.selectors import get_job, job_json
from console.roles import OPERATOR, VIEWER


class JobDetailView(RoleAPIView):
    """``GET /jobs/{id}/``: status, ``progress`` of ``total`` and the per-item results so far."""

    required_roles = {"GET": VIEWER}

    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_json(get_job(job_id)))


class JobRetryView(RoleAPIView):
    """``POST /jobs/{id}/retry/``: queue a DLQ resend job again (202): a failed one, a done one with failed dead
    letters, or a running one whose worker stopped (``stale``). Dead letters it resent already are not resent
    again. 409 for any other job."""

    required_roles = {"POST": OPERATOR}

    def post(self, request: Request, job_id: str) -> Response:
        job = retry_job(request.user, get_job(job_id))
        return Response(job_json(job), status=status.HTTP_202_ACCEPTED)
