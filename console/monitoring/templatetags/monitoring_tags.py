"""``{% disk_banner %}`` and ``{% group_lag_chart group %}``.

``{% disk_banner %}``: the red banner every console page shows while a broker's newest disk reading is at
or past the ratio where it refuses writes (:func:`console.selectors.monitoring.disk_alerts`). Computed once
per request (kept on the request object), two indexed queries, no broker call."""

from __future__ import annotations

from typing import Any

from django import template

from console.selectors.monitoring import disk_alerts
from console.selectors.monitoring_charts import RANGES, range_key
from console.selectors.monitoring_charts import group_lag_chart as group_lag

register = template.Library()


@register.inclusion_tag("console/disk_banner.html", takes_context=True)
def disk_banner(context: Any) -> dict[str, Any]:
    request = context.get("request")
    alerts = getattr(request, "_disk_alerts", None)
    if alerts is None:
        alerts = disk_alerts()
        if request is not None:
            request._disk_alerts = alerts
    return {"disk_alerts": alerts}


@register.inclusion_tag("console/group_lag_chart.html", takes_context=True)
def group_lag_chart(context: Any, group: str) -> dict[str, Any]:
    """``{% group_lag_chart group %}``: the group's sampled lag per topic over ``?range=`` (1h / 24h / 7d)."""
    request = context.get("request")
    chosen = range_key(request.GET.get("range") if request is not None else None)
    return {"chart": group_lag(group, chosen), "chart_range": chosen, "chart_ranges": list(RANGES),
            "topic": context.get("topic") or ""}
