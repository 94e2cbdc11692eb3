"""The audit log page (admin): latest events, filtered by action and user."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from console.roles import ADMIN
from console.selectors.audit import audit_page
from console.selectors.ui_audit import audit_actions
from console.views.base import page

PAGE_SIZE = 100


@page(ADMIN)
@require_http_methods(["GET"])
def audit_log(request: HttpRequest) -> HttpResponse:
    action = request.GET.get("action", "").strip()
    user = request.GET.get("user", "").strip()
    cursor = request.GET.get("cursor", "").strip()
    data = audit_page(action=action, user=user, cursor=cursor, limit=PAGE_SIZE)
    return render(request, "console/audit.html", {"events": data["results"], "next": data["next"],
                                                  "action": action, "user_filter": user, "actions": audit_actions()})
