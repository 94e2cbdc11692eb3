"""The audit log endpoint (admin)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.api.serializers import LimitSerializer
from console.roles import ADMIN
from console.selectors.audit import audit_page


class AuditQuerySerializer(LimitSerializer):
    """The filters, as given (no trimming); a NUL character is a 400 (PostgreSQL text cannot hold one)."""

    action = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    user = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    target = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    cursor = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")


class AuditListView(RoleAPIView):
    """``GET /audit/?action=&user=&target=&cursor=&limit=``, newest first."""

    required_roles = {"GET": ADMIN}

    @extend_schema(parameters=[AuditQuerySerializer])
    def get(self, request: Request) -> Response:
        q = validated(AuditQuerySerializer, request.query_params)
        return Response(audit_page(q["action"], q["user"], q["target"], q["cursor"], q["limit"]))
