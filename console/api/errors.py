"""The one exception handler: every error is JSON ``{"error": <short code>, "detail": <text>}``.

| raised                                        | status | error                   |
|-----------------------------------------------|--------|-------------------------|
| DRF ValidationError / ParseError, ValueError  | 400    | invalid / parse_error   |
| NotAuthenticated / AuthenticationFailed       | 401    | not_authenticated       |
| PermissionDenied                              | 403    | permission_denied       |
| NotFound / Http404 / ClientError not-found    | 404    | not_found               |
| ClientError refused by the broker             | 400/409| broker code name        |
| ConnectionError / TimeoutError, busy broker   | 503    | broker_unavailable      |
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode
from console.errors import ApiError

NOT_FOUND_CODES = {ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND,
                   ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST}
BAD_REQUEST_CODES = {ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SUBSCRIPTION_PARSE_FAILED}
UNAVAILABLE_CODES = {ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY, ResponseCode.SERVICE_NOT_AVAILABLE}


def client_error_status(exc: ClientError) -> tuple[int, str]:
    """The HTTP status and short code for an error the broker or name server returned."""
    try:
        name = ResponseCode(exc.code).name.lower()
    except ValueError:
        name = f"broker_error_{exc.code}"
    if exc.code in NOT_FOUND_CODES:
        return status.HTTP_404_NOT_FOUND, "not_found"
    if exc.code in BAD_REQUEST_CODES:
        return status.HTTP_400_BAD_REQUEST, name
    if exc.code in UNAVAILABLE_CODES:
        return status.HTTP_503_SERVICE_UNAVAILABLE, "broker_unavailable"
    return status.HTTP_409_CONFLICT, name


def _text(detail: Any) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in detail.items())
    if isinstance(detail, list):
        return " ".join(_text(v) for v in detail)
    return str(detail)


def _body(code: str, detail: Any, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": _text(detail), **extra}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF ``EXCEPTION_HANDLER``: map ``exc`` to a JSON error response (None lets Django show a 500)."""
    if isinstance(exc, ApiError):
        return Response(_body(exc.error_code, exc.detail), status=exc.status_code)
    if isinstance(exc, ClientError):
        code, name = client_error_status(exc)
        return Response(_body(name, str(exc)), status=code)
    if isinstance(exc, ConnectionError | TimeoutError):
        return Response(_body("broker_unavailable", f"broker or name server unreachable: {exc}"),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, ValueError):  # SDK argument checks (invalid names and the like)
        return Response(_body("invalid", str(exc)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404):
        return Response(_body("not_found", str(exc) or "not found"), status=status.HTTP_404_NOT_FOUND)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = _body("invalid", exc.detail, fields=exc.detail)
    elif isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        response.data = _body("not_authenticated", exc.detail)
    elif isinstance(exc, exceptions.PermissionDenied):
        response.data = _body("permission_denied", exc.detail)
    elif isinstance(exc, exceptions.NotFound):
        response.data = _body("not_found", exc.detail)
    elif isinstance(exc, exceptions.APIException):
        response.data = _body(str(exc.default_code), exc.detail)
    return response
