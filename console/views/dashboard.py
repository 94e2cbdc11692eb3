"""The dashboard: brokers with address and health, topic totals, and charts of the sampled history (message
rates, busiest topics, disk use per broker) over the last hour, 24 hours or 7 days (``?range=``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.roles import VIEWER
from console.selectors import monitoring_charts, ui_cluster
from console.views.base import page


@page(VIEWER)
def dashboard(request: HttpRequest) -> HttpResponse:
    brokers = ui_cluster.brokers()
    chart_range = monitoring_charts.range_key(request.GET.get("range"))
    context = {"brokers": brokers, "totals": ui_cluster.topic_totals(),
               "unhealthy": [b for b in brokers if not b["healthy"]],
               "charts": monitoring_charts.dashboard_charts(chart_range), "chart_range": chart_range,
               "chart_ranges": list(monitoring_charts.RANGES)}
    return render(request, "console/dashboard.html", context, status=200 if brokers else 503)
