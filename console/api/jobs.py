"""Background job endpoint."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView
from console.jobs.selectors import get_job, job_json
from console.roles import VIEWER


class JobDetailView(RoleAPIView):
    """``GET /jobs/{id}/``: status, ``progress`` of ``total`` and the per-item results so far."""

    required_roles = {"GET": VIEWER}

    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_json(get_job(job_id)))
