"""The signed-in user's own preferences: ``GET/PATCH /api/v1/me/preferences/``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.roles import VIEWER
from console.selectors.preferences import is_timezone, preferences
from console.services.preferences import set_timezone


class PreferencesSerializer(serializers.Serializer):
    """``PATCH /me/preferences/``: ``timezone``, an IANA zone name such as ``Europe/Paris``."""

    timezone = serializers.CharField(max_length=64)

    def validate_timezone(self, value: str) -> str:
        if not is_timezone(value):
            raise serializers.ValidationError(f"{value!r} is not an IANA time zone")
        return value


class PreferencesView(RoleAPIView):
    """``GET``: ``{"username", "timezone"}``; ``PATCH {"timezone": ...}`` changes the zone the pages use."""

    required_roles = {"GET": VIEWER, "PATCH": VIEWER}

    @extend_schema(operation_id="me_preferences_retrieve")
    def get(self, request: Request) -> Response:
        return Response(preferences(request.user))

    @extend_schema(request=PreferencesSerializer, operation_id="me_preferences_update")
    def patch(self, request: Request) -> Response:
        set_timezone(request.user, validated(PreferencesSerializer, request.data)["timezone"])
        return Response(preferences(request.user))
