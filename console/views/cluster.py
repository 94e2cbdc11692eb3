"""The cluster / routes page: the broker groups (master, slaves, replication lag) and each topic's route."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from console.roles import VIEWER
from console.selectors.replication import broker_groups
from console.selectors.topics import TOPIC_TYPES
from console.selectors.ui_routes import topic_routes
from console.views.base import page


@page(VIEWER)
@require_http_methods(["GET"])
def cluster(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("search", "").strip()[:255]
    kind = request.GET.get("type", "")
    if kind not in TOPIC_TYPES:
        kind = ""
    return render(request, "console/cluster.html", {"brokers": broker_groups(), "routes": topic_routes(search, kind),
                                                    "search": search, "kind": kind, "types": TOPIC_TYPES})
