"""``GET /export/{kind}/`` and ``POST /import/{kind}/`` (``kind``: ``topics`` or ``groups``): RocketMQ's JSON forms
of topic and subscription-group configs (what a broker keeps in ``topics.json`` / ``subscriptionGroup.json``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView
from console.errors import not_found
from console.roles import ADMIN, VIEWER
from console.services.config_io import export_config, import_config

KINDS = ("topics", "groups")


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise not_found(f"nothing to export or import as {kind!r} (topics or groups)")
    return kind


class ConfigExportView(RoleAPIView):
    """Every master's table merged; ``?system=true`` keeps system topics and built-in groups."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[OpenApiParameter("cluster", str), OpenApiParameter("system", bool)])
    def get(self, request: Request, kind: str) -> Response:
        doc = export_config(_kind(kind), request.query_params.get("cluster") or None,
                            request.query_params.get("system", "").lower() == "true")
        resp = Response(doc)
        resp["Content-Disposition"] = f'attachment; filename="{kind}.json"'
        return resp


class ConfigImportView(RoleAPIView):
    """The body is the exported document (or a broker's ``topics.json`` / ``subscriptionGroup.json``)."""

    required_roles = {"POST": ADMIN}

    @extend_schema(parameters=[OpenApiParameter("cluster", str)])
    def post(self, request: Request, kind: str) -> Response:
        return Response(import_config(request.user, _kind(kind), request.data,
                                      request.query_params.get("cluster") or None))
