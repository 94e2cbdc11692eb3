"""``{% disk_banner %}``: the red banner every console page shows while a broker's newest disk reading is at
or past the ratio where it refuses writes (:func:`console.selectors.monitoring.disk_alerts`). Computed once
per request (kept on the request object), two indexed queries, no broker call."""

from __future__ import annotations

from typing import Any

from django import template

from console.selectors.monitoring import disk_alerts

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
