"""The audit log endpoint (admin)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.api.serializers import LimitSerializer
from console.roles import ADMIN
from console.selectors.audit import audit_page


class AuditListView(RoleAPIView):
    """``GET /audit/?action=&user=&target=&cursor=&limit=``, newest first."""

    required_roles = {"GET": ADMIN}

    @extend_schema(parameters=[OpenApiParameter(n, str) for n in ("action", "user", "target", "cursor")]
                   + [LimitSerializer])
    def get(self, request: Request) -> Response:
        q = request.query_params
        limit = validated(LimitSerializer, q)["limit"]
        return Response(audit_page(q.get("action", ""), q.get("user", ""), q.get("target", ""), q.get("cursor", ""),
                                   limit))
