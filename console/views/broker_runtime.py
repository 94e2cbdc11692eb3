"""A broker's runtime statistics page (GET_BROKER_RUNTIME_INFO in full)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from console.roles import VIEWER
from console.selectors.broker_runtime import broker_runtime
from console.views.base import page


@page(VIEWER)
@require_http_methods(["GET"])
def broker_runtime_page(request: HttpRequest, addr: str) -> HttpResponse:
    return render(request, "console/broker_runtime.html", {"b": broker_runtime(addr)})
