"""``GET /healthz`` (no authentication): 200 when the database and every broker answer, else 503; Redis is
reported alongside (see :func:`console.selectors.health.health`)."""

from __future__ import annotations

from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.selectors.health import health


class HealthView(APIView):
    """The web app, database, Redis and per-broker status."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        report, healthy = health()
        return Response(report, status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE)
