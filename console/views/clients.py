"""Pages that reach a consumer group's live clients through the brokers: each client's running info (asked
again on every load: the Refresh button), and "consume directly with client X" on a message's page (operators,
audited), which shows the client's answer and how long its listener took."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from console.errors import ApiError
from console.roles import OPERATOR, VIEWER
from console.selectors.clients import group_running_info
from console.services.clients import consume_directly
from console.views.base import invalid_group_page, page
from console.views.messages import detail_context


@page(VIEWER)
@require_http_methods(["GET"])
def group_clients(request: HttpRequest, group: str) -> HttpResponse:
    if (bad := invalid_group_page(request, group)) is not None:
        return bad
    return render(request, "console/group_clients.html",
                  {"group": group, "clients": group_running_info(group), "asked_at": timezone.now()})


@page(OPERATOR)
@require_http_methods(["POST"])
def message_consume_directly(request: HttpRequest, msg_id: str) -> HttpResponse:
    """POST ``target`` = ``group client_id`` (one of the page's choices): the message's page with the answer."""
    context = detail_context(request, msg_id, str(request.POST.get("topic", "")).strip())
    group, _, client_id = str(request.POST.get("target", "")).strip().partition(" ")
    status = 200
    try:
        context["direct"] = consume_directly(request.user, context["m"]["offset_msg_id"], group, client_id,
                                             context["m"]["topic"])
    except ApiError as exc:
        context["direct_error"] = {"code": exc.error_code, "detail": str(exc.detail), "group": group,
                                   "client_id": client_id}
        status = exc.status_code
    return render(request, "console/message_detail.html", context, status=status)
