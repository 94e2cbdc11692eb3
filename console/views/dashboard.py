"""The dashboard: brokers with address and health, and topic totals."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.roles import VIEWER
from console.selectors import ui_cluster
from console.views.base import page


@page(VIEWER)
def dashboard(request: HttpRequest) -> HttpResponse:
    brokers = ui_cluster.brokers()
    context = {"brokers": brokers, "totals": ui_cluster.topic_totals(),
               "unhealthy": [b for b in brokers if not b["healthy"]]}
    return render(request, "console/dashboard.html", context, status=200 if brokers else 503)
