"""The OpenAPI schema class: views here return plain JSON objects built by selectors and services, so a
view with no declared serializer documents an object instead of failing to guess one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes


class ConsoleAutoSchema(AutoSchema):
    """``extend_schema(request=..., responses=...)`` still overrides these defaults per method."""

    def get_request_serializer(self) -> Any:
        return None

    def get_response_serializers(self) -> Any:
        return OpenApiTypes.OBJECT


class HashedTokenScheme(OpenApiAuthenticationExtension):
    """Documents :class:`console.api.authentication.HashedTokenAuthentication` as ``Authorization: Token <key>``."""

    target_class = "console.api.authentication.HashedTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "Token-based authentication with required prefix \"Token\""}
