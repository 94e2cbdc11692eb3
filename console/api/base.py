"""Shared view plumbing: role-checked API views and parameter helpers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from console.api.permissions import RolePermission
from console.api.serializers import validate_group
from console.errors import bad_request
from console.roles import OPERATOR, has_role


class RoleAPIView(APIView):
    """An API view whose ``required_roles`` maps HTTP methods to the role each needs."""

    permission_classes = [RolePermission]
    required_roles: dict[str, str] = {}


def validated(serializer_class: type[serializers.Serializer], data: Any) -> Any:
    """``serializer_class(data=data)``'s validated data (raises a 400 on bad input)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def group_param(group: str) -> str:
    """A consumer group from the URL, or a 400."""
    try:
        return validate_group(group)
    except serializers.ValidationError as exc:
        raise bad_request("invalid_group", " ".join(map(str, exc.detail))) from None


def can_read_bodies(request: Request) -> bool:
    """Operators and admins see message bodies; viewers see metadata only."""
    return has_role(request.user, OPERATOR)
