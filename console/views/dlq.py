"""Dead letters: choose a group, browse its dead letters, resend a selection (operator+) with per-message
results."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from console.roles import OPERATOR, VIEWER, has_role
from console.selectors.messages import MESSAGE_ID
from console.selectors.ui_messages import dead_letter_rows
from console.services.messages import resend_dead_letters
from console.views.base import error_page, page
from console.views.forms import GroupForm

LIMIT = 200


@page(VIEWER)
@require_http_methods(["GET"])
def dlq_index(request: HttpRequest) -> HttpResponse:
    form = GroupForm(request.GET or None)
    if form.is_bound and form.is_valid():
        return redirect("dlq-page", group=form.cleaned_data["group"])
    return render(request, "console/dlq.html", {"form": form, "group": None})


@page(VIEWER)
@require_http_methods(["GET", "POST"])
def dlq_group(request: HttpRequest, group: str) -> HttpResponse:
    form = GroupForm({"group": group})
    if not form.is_valid():
        return error_page(request, 400, "invalid_group", " ".join(form.errors.get("group", [])))
    results = None
    status = 200
    if request.method == "POST":
        if not has_role(request.user, OPERATOR):
            return render(request, "console/forbidden.html", {"required": OPERATOR}, status=403)
        ids = [i.upper() for i in request.POST.getlist("offset_msg_id") if MESSAGE_ID.match(i)]
        if ids:
            results = resend_dead_letters(request.user, group, ids, None)
        else:
            status = 400
    rows, truncated = dead_letter_rows(group, LIMIT)
    return render(request, "console/dlq.html", {
        "form": form, "group": group, "rows": rows, "truncated": truncated, "limit": LIMIT,
        "results": results, "nothing_selected": status == 400,
    }, status=status)
