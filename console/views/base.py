"""Page plumbing: the role check every page makes, and friendly pages for errors the API turns into JSON.

``@page(role)`` = login required + ``has_role`` (403 page otherwise) + error mapping: an unreachable broker or
name server renders the "unavailable" banner with a 503, an :class:`ApiError` or refused broker request renders
the error page with its status (404, 400, 409...), and the SDK's ValueError a 400 (as in the API).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from broker_core.client import ClientError
from console.api.errors import client_error_status
from console.errors import ApiError
from console.roles import has_role, role_of

View = Callable[..., HttpResponse]


def unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """The 503 page: the name server or a broker cannot be reached."""
    return render(request, "console/unavailable.html", {"error": str(exc)}, status=503)


def error_page(request: HttpRequest, status: int, code: str, detail: str) -> HttpResponse:
    """A page for a refused or invalid request."""
    return render(request, "console/error.html", {"status": status, "code": code, "detail": detail}, status=status)


def api_error_page(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return error_page(request, exc.status_code, exc.error_code, str(exc.detail))


def client_error_page(request: HttpRequest, exc: ClientError) -> HttpResponse:
    status, code = client_error_status(exc)
    if status == 503:
        return unavailable(request, exc)
    return error_page(request, status, code, str(exc))


def page(role: str) -> Callable[[View], View]:
    """Decorate a page view that needs ``role`` (or higher)."""

    def decorate(view: View) -> View:
        @wraps(view)
        @login_required
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not has_role(request.user, role):
                return render(request, "console/forbidden.html",
                              {"required": role, "role": role_of(request.user)}, status=403)
            try:
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return api_error_page(request, exc)
            except ClientError as exc:
                return client_error_page(request, exc)
            except (ConnectionError, TimeoutError) as exc:
                return unavailable(request, exc)
            except ValueError as exc:  # the SDK's argument checks, as the API's exception handler maps them
                return error_page(request, 400, "invalid", str(exc))

        return wrapper

    return decorate


def invalid_group_page(request: HttpRequest, group: str) -> HttpResponse | None:
    """A 400 page when ``group`` is not a valid group name, else None."""
    from console.views.forms import GroupForm

    form = GroupForm({"group": group})
    if not form.is_valid():
        return error_page(request, 400, "invalid_group", " ".join(form.errors.get("group", [])))
    return None
