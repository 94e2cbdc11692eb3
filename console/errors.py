"""Errors services, selectors and views raise on purpose; :mod:`console.api.errors` turns them into JSON."""

from __future__ import annotations

from rest_framework import exceptions, status


class ApiError(exceptions.APIException):
    """An error with an explicit HTTP status and short code."""

    def __init__(self, status_code: int, code: str, detail: str) -> None:
        super().__init__(detail, code)
        self.status_code = status_code
        self.error_code = code


def not_found(detail: str) -> ApiError:
    """A 404 ``not_found``."""
    return ApiError(status.HTTP_404_NOT_FOUND, "not_found", detail)


def bad_request(code: str, detail: str) -> ApiError:
    """A 400 with the short code ``code``."""
    return ApiError(status.HTTP_400_BAD_REQUEST, code, detail)
